/**
 * Word that a machine's row changed, inside one pier process: waits (create, the wait
 * route) wake at once instead of at their next poll. Polling stays as the fallback, for
 * changes another process made; a missed word costs one poll interval, nothing more.
 */
import { EventEmitter } from 'node:events';
import type { ServiceContext } from '../context.js';

/**
 * How long the proxy may answer from its list of an app's machines: the backstop for
 * changes no word reaches a process about (another replica's). A deploy waits this long
 * before it stops a machine it took out of the routes.
 */
export const ROUTES_TTL_MS = 1_000;

/** The emitter of `ctx.memory.machineChanges`: one listener per waiting request, no cap. */
export function newMachineChanges(): EventEmitter {
  return new EventEmitter().setMaxListeners(0);
}

const emitterOf = (ctx: ServiceContext): EventEmitter => ctx.memory.machineChanges;

/** The event every change is also told under, with the machine's id. */
const ANY = Symbol('any machine');

/** Says that machine `id`'s row changed. */
export function machineChanged(ctx: ServiceContext, id: string): void {
  const e = emitterOf(ctx);
  e.emit(id);
  e.emit(ANY, id);
}

/**
 * Says that an operation on machine `id` began (its row is in a transition state now):
 * heard by `onAnyMachineChange` listeners, so the proxy stops routing to a machine about
 * to stop or freeze; not by waits and policies, as nothing they follow is final yet.
 */
export function machineTransition(ctx: ServiceContext, id: string): void {
  emitterOf(ctx).emit(ANY, id);
}

/** Calls `fn(id)` on every change word of this process (the proxy's routing cache). */
export function onAnyMachineChange(ctx: ServiceContext, fn: (id: string) => void): void {
  emitterOf(ctx).on(ANY, fn);
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
