/**
 * The spawner process: runs the commands pier sends over IPC and answers with their
 * outcome (spawner.ts says why it exists). It ends when pier does.
 */
import { execTool } from './exec-tool.js';
import type { SpawnRequest } from './protocol.js';

process.on('message', (req: SpawnRequest) => {
  void execTool(req).then((reply) => {
    if (process.connected) process.send?.(reply);
  });
});

process.on('disconnect', () => process.exit(0));
process.send?.({ ready: true });
