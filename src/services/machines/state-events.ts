/**
 * Word that a machine's row changed, inside one pier process: waits (create, the wait
 * route) wake at once instead of at their next poll. Polling stays as the fallback, for
 * changes another process made; a missed word costs one poll interval, nothing more.
 */
import { EventEmitter } from 'node:events';
import type { ServiceContext } from '../context.js';

/** The emitter of `ctx.memory.machineChanges`: one listener per waiting request, no cap. */
export function newMachineChanges(): EventEmitter {
  return new EventEmitter().setMaxListeners(0);
}

const emitterOf = (ctx: ServiceContext): EventEmitter => ctx.memory.machineChanges;

/** Says that machine `id`'s row changed. */
export function machineChanged(ctx: ServiceContext, id: string): void {
  emitterOf(ctx).emit(id);
}

/** Resolves when machine `id` changes, or after `ms` at the latest. */
export function nextChange(ctx: ServiceContext, id: string, ms: number): Promise<void> {
  const e = emitterOf(ctx);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      e.off(id, done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    e.once(id, done);
  });
}
