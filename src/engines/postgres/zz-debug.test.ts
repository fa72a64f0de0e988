import { setTimeout as sleep } from 'node:timers/promises';
import { it } from 'vitest';
import { Templates } from './template.js';
import { makeTestEnv } from './test-env.test-helper.js';
it('debug', async () => {
  const t = await makeTestEnv('dbg');
  try {
    await new Templates().ensure(t.env);
    const primary = await t.instance();
    await t.engine.provision(t.env, primary, {});
    const standby = await t.instance();
    await t.engine.createStandby(t.env, primary, standby);
    await t.query(primary, 'CREATE TABLE t (n int)');
    await t.engine.destroy(t.env, standby);
    const client = await t.connect(primary);
    const pending = client.query('INSERT INTO t VALUES (1)').then(() => console.log('INSERT DONE'), (e) => console.log('INSERT ERR', e.message));
    await sleep(300);
    console.log('TRACE start', Date.now() % 100000);
    await Promise.race([t.engine.detachStandby(t.env, primary), sleep(4000).then(() => console.log('TIMEOUT'))]);
    void pending;
  } finally { await t.cleanup(); }
}, 60000);
