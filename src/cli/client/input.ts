/** Reading what the person pipes in, so keys and secret values stay out of shell history. */

/** Reads all of stdin as UTF-8. Hints on stderr when a terminal would otherwise just hang. */
export async function readStdin(what: string): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write(`Reading ${what} from stdin; end with Ctrl-D.\n`);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) {
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Drops one final line ending, which `echo` and editors add but nobody means as data. */
export function chompNewline(s: string): string {
  return s.replace(/\r?\n$/, '');
}
