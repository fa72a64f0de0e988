/**
 * A webhook dispatcher in a process of its own, so that a test can kill it with SIGKILL
 * in the middle of an attempt. argv: database URL, data dir (for the master key), lease ms.
 * Prints `ready` once it listens for work.
 */
import pino from 'pino';
import { SecretBox, loadMasterKey } from '../../src/crypto/secret-box.js';
import { OutboundGuard } from '../../src/host/outbound-guard.js';
import { WebhookDispatcher } from '../../src/services/webhooks/dispatcher.js';
import { openStore } from '../../src/store/db.js';

const [url, dataDir, leaseMs] = process.argv.slice(2) as [string, string, string];
const store = openStore(url);
const dispatcher = new WebhookDispatcher({
  db: store.db,
  pool: store.pool,
  box: new SecretBox(await loadMasterKey(dataDir)),
  guard: new OutboundGuard({ allowPrivate: true }),
  log: pino({ level: 'silent' }),
  timeoutMs: 60_000,
  retryScale: 1,
  concurrency: 4,
  leaseMs: Number(leaseMs),
});
await dispatcher.start();
console.log('ready');
