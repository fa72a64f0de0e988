/**
 * The digest worker's thread: it hashes the bodies that the main thread hands it, so that
 * MD5 and the checksums of large uploads (a few milliseconds of CPU per megabyte) do not
 * hold up the event loop that serves every other request. See digest-pool.ts.
 */
import { parentPort } from 'node:worker_threads';
import { DigestSet } from './running.js';
import type { DigestReply, DigestRequest } from './digest-protocol.js';

const port = parentPort;
if (!port) throw new Error('digest-worker.ts runs as a worker thread');

const tasks = new Map<number, DigestSet>();

port.on('message', (msg: DigestRequest) => {
  switch (msg.op) {
    case 'open':
      tasks.set(msg.id, new DigestSet(msg.algorithms));
      return;
    case 'data': {
      const task = tasks.get(msg.id);
      if (task) for (const chunk of msg.chunks) task.update(chunk);
      return;
    }
    case 'end': {
      const task = tasks.get(msg.id);
      tasks.delete(msg.id);
      const reply: DigestReply = task
        ? { op: 'done', id: msg.id, digests: [...task.digests()] }
        : { op: 'failed', id: msg.id, error: `no digest task ${msg.id}` };
      port.postMessage(reply);
      return;
    }
    case 'drop':
      tasks.delete(msg.id);
      return;
  }
});
