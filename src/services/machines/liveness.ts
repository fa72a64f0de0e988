/**
 * Liveness of machines (spec 2.11 `liveness` and its companions): every few seconds the
 * platform asks whether each running machine listens on its `internalPort`. The runtime
 * answers from the machine's socket tables where it can (`MachineRuntime.listening`,
 * runc), without connecting: a connection would count against the app's
 * `newConnectionsPerMinute` (about 12 a minute taken from the customer's limit). Where it
 * cannot (gVisor, whose sockets the host does not see), the platform opens a TCP
 * connection, as the proxy would, and that one does count. `listening` when a socket
 * listens (or the connection is accepted); `not-listening` with the reason (nothing
 * listens, only on another address, refused, no answer in time) when not; `no-signal`
 * when the machine does not run (suspended, stopped), since probing a sleeping machine
 * would wake it. `livenessSince` is when the current value began, `livenessAt` when it
 * was last confirmed.
 */
import net from 'node:net';
import { sql } from 'kysely';
import type { ServiceContext } from '../context.js';
import { everyInterval } from '../ticker.js';
import { runtimeOf } from './lifecycle.js';
import { configOf, machinesQuery, type MachineRow } from './records.js';

type Liveness = NonNullable<MachineRow['liveness']>;

/** How long a probe waits for the connection. */
const PROBE_TIMEOUT_MS = 1000;

/** Connects to host:port; resolves with why not, or undefined when accepted. */
export function probe(host: string, port: number, timeoutMs = PROBE_TIMEOUT_MS) {
  return new Promise<string | undefined>((resolve) => {
    const socket = net.connect({ host, port });
    const done = (why?: string) => {
      socket.destroy();
      resolve(why);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer on port ${port} within ${timeoutMs} ms`));
    socket.once('connect', () => done());
    socket.once('error', (err: NodeJS.ErrnoException) =>
      done(err.code === 'ECONNREFUSED' ? `connection refused on port ${port}` : err.message),
    );
  });
}

async function observe(ctx: ServiceContext, row: MachineRow): Promise<[Liveness, string | null]> {
  if (row.observed_state !== 'running') return ['no-signal', `machine is ${row.observed_state}`];
  const port = configOf(row).internalPort;
  const runtime = runtimeOf(ctx);
  const seen = await runtime.listening?.(row.id, port);
  if (seen) return seen.listening ? ['listening', null] : ['not-listening', seen.reason];
  const address = await runtime.address(row.id, port);
  if (!address) return ['no-signal', 'machine has no address'];
  const why = await probe(address.host, address.port);
  return why ? ['not-listening', why] : ['listening', null];
}

export async function livenessTick(ctx: ServiceContext): Promise<void> {
  const rows = await machinesQuery(ctx.db)
    .where('machines.host', '=', 'local')
    .where((eb) =>
      eb.or([
        eb('machines.observed_state', 'in', ['running', 'suspended', 'stopped']),
        eb('machines.liveness', 'is not', null),
      ]),
    )
    .where('machines.observed_state', '<>', 'deleted')
    .execute();
  if (rows.length === 0) return;
  const seen = await Promise.all(rows.map(async (row) => [row.id, ...(await observe(ctx, row))]));
  // One statement for all: a hundred machines are one write every few seconds, not a hundred.
  const values = sql.join(seen.map(([id, value, reason]) => sql`(${id}, ${value}, ${reason})`));
  await sql`
    UPDATE machines m SET
      liveness = v.liveness,
      liveness_reason = v.reason,
      liveness_at = now(),
      liveness_since = CASE WHEN m.liveness IS DISTINCT FROM v.liveness
                            THEN now() ELSE m.liveness_since END
    FROM (VALUES ${values}) AS v(id, liveness, reason)
    WHERE m.id = v.id`.execute(ctx.db);
}

/** Probes every machine every `everyMs`; returns a stopper. */
export function scheduleLiveness(ctx: ServiceContext, everyMs = 5000): () => void {
  return everyInterval(ctx.log, 'machine liveness', everyMs, () => livenessTick(ctx));
}
