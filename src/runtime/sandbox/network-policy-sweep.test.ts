/**
 * The sweep of policies that crashed runs left (network-policy.ts): a `pp_<veth>` table
 * and a `pi…` ifb device whose machine veth is gone are removed; those of a live veth,
 * and devices that only look alike (the bridge `pier0`, another ifb), are kept.
 */
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { run } from './exec.js';
import { sweepNetworkPolicies } from './network-policy.js';

const asRoot = process.getuid?.() === 0;
const hex = (s: string) =>
  createHash('sha256').update(`${s}${process.pid}`).digest('hex').slice(0, 11);
const gone = hex('gone');
const live = hex('live');
const quiet = (argv: string[]) => run(argv).catch(() => '');

describe.skipIf(!asRoot)('sweepNetworkPolicies', () => {
  afterAll(async () => {
    for (const dev of [`pi${gone}`, `pi${live}`, `pv${live}`, `pf${live}`]) {
      await quiet(['ip', 'link', 'del', 'dev', dev]);
    }
    for (const veth of [`pv${gone}`, `pv${live}`]) {
      await quiet(['nft', 'delete', 'table', 'ip', `pp_${veth}`]);
    }
  });

  it('removes what a gone veth left and keeps a live one', async () => {
    // A live machine: its veth (with a peer), its ifb and its table.
    await run(['ip', 'link', 'add', `pv${live}`, 'type', 'veth', 'peer', 'name', `pf${live}`]);
    await run(['ip', 'link', 'add', `pi${live}`, 'type', 'ifb']);
    await run(['nft', 'add', 'table', 'ip', `pp_pv${live}`]);
    // A machine that is gone: no veth, but its ifb and table are still here.
    await run(['ip', 'link', 'add', `pi${gone}`, 'type', 'ifb']);
    await run(['nft', 'add', 'table', 'ip', `pp_pv${gone}`]);

    const swept = await sweepNetworkPolicies();
    expect(swept).toContain(`pv${gone}`);
    expect(swept).not.toContain(`pv${live}`);
    const links = await run(['ip', '-o', 'link', 'show']);
    const tables = await run(['nft', 'list', 'tables', 'ip']);
    expect(links).not.toContain(`pi${gone}`);
    expect(tables).not.toContain(`pp_pv${gone}`);
    expect(links).toContain(`pi${live}`);
    expect(tables).toContain(`pp_pv${live}`);
  });
});
