/**
 * Reads a tar stream entry by entry, as an async iterator, with node-tar's Parser doing
 * the format (ustar, pax headers, GNU long names, base-256 numbers, checksums).
 *
 * We use node-tar for parsing only, not its Unpack: applying entries is where OCI differs
 * from plain tar (whiteouts, opaque directories) and where path confinement lives, and a
 * sequential applier of our own (unpack-layer.ts) is much easier to reason about than
 * node-tar's concurrent one with its own, separately patched, symlink defences.
 *
 * The Parser emits one entry at a time and waits for it to end before the next; this
 * wrapper feeds it with backpressure and hands each entry to the loop body. An entry the
 * body did not read is drained when the loop asks for the next one. When the source fails
 * (bad gzip, an abort, the unpack budget) or the parser does while the body is reading an
 * entry, that entry fails with the same error, so the body never waits for bytes that
 * will not come.
 */
import { Parser, type ReadEntry } from 'tar';

/** Thrown for a stream that is not a valid tar archive. */
export class TarFormatError extends Error {}

/**
 * Yields the entries of the uncompressed tar `source`. Meta entries (pax, GNU long
 * names) are folded into the entries they describe. Unknown entry types are skipped and
 * counted in `stats.ignored`. An empty archive (no bytes, or only zero blocks, as Docker's
 * empty layers are) yields nothing.
 */
export async function* tarEntries(
  source: AsyncIterable<Buffer>,
  stats: { ignored: number } = { ignored: 0 },
): AsyncGenerator<ReadEntry, void, void> {
  const parser = new Parser({ strict: true, zstd: false, brotli: false });
  const queue: ReadEntry[] = [];
  let failure: unknown;
  let finished = false;
  let onlyZeros = true;
  let wake: (() => void) | undefined;
  let unblockFeed: (() => void) | undefined;
  let stopped = false;
  // After the end-of-archive blocks the Parser would buffer whatever follows in memory;
  // a layer may carry padding there (or, if hostile, gigabytes): hash it, do not keep it.
  let sawEof = false;
  let current: ReadEntry | undefined;
  const poke = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const fail = (err: unknown) => {
    failure ??= err;
    const c = current;
    if (c && !c.emittedEnd) {
      c.on('error', () => undefined); // the body may not be reading it: never unhandled
      c.destroy(failure);
    }
    unblockFeed?.();
    poke();
  };

  parser.on('entry', (entry: ReadEntry) => {
    queue.push(entry);
    poke();
  });
  parser.on('ignoredEntry', () => stats.ignored++);
  parser.on('eof', () => (sawEof = true));
  parser.on('error', (err: Error & { tarCode?: string }) => {
    // node-tar calls an archive of only zero blocks unrecognized; for layers it is valid.
    if (onlyZeros && err.tarCode === 'TAR_BAD_ARCHIVE' && /Unrecognized/.test(err.message)) return;
    fail(new TarFormatError(err.message));
  });
  parser.on('end', () => {
    finished = true;
    poke();
  });

  const feeding = (async () => {
    for await (const chunk of source) {
      if (stopped || failure) return;
      if (sawEof) continue;
      if (onlyZeros && chunk.some((b) => b !== 0)) onlyZeros = false;
      if (!parser.write(chunk)) {
        await new Promise<void>((resolve) => {
          unblockFeed = resolve;
          parser.once('drain', resolve);
        });
        unblockFeed = undefined;
      }
    }
    if (!stopped && !failure) parser.end();
  })().catch(fail);

  try {
    for (;;) {
      if (current && !current.emittedEnd) current.resume();
      current = undefined;
      if (failure) throw failure;
      current = queue.shift();
      if (current) {
        yield current;
        continue;
      }
      if (finished) break;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    await feeding;
    if (failure) throw failure;
  } finally {
    stopped = true;
    unblockFeed?.();
    await feeding;
  }
}
