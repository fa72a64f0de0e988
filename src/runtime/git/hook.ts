/**
 * pier's one git hook, `pre-receive`: it runs after the pack is received and checked,
 * while the pushed objects are still in quarantine and before any ref moves. It hands
 * the ref updates to the pier process that runs this push, through the unix socket that
 * process named in `PIER_PUSH_SOCKET` when it started receive-pack, writes whatever pier
 * says to stderr (git sends it to the pushing client, which prints it as `remote:`
 * lines), and exits with the code pier gives: 0 lets the refs move, anything else
 * refuses the whole push. A lost socket refuses the push too.
 *
 * The hook is pier's code, written into pier's hooks directory (`core.hooksPath`), never
 * into a repository: a push cannot bring or change hooks. It takes no data from the push
 * but what git hands every pre-receive (stdin lines of object ids and ref names, and the
 * quarantine's path), which it forwards as JSON, untouched; nothing goes through a shell
 * but the fixed two lines below, which run node on the script beside them.
 */
import { readFile, rename, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';

/** The wrapper git runs: node on the CommonJS script next to it (`$0.cjs`). */
const WRAPPER = `#!/bin/sh
exec "$PIER_GIT_NODE" "$0.cjs"
`;

/**
 * The script (CommonJS, whatever package.json is near the data directory). Messages
 * from pier are JSON lines: `{"say": text}` to relay, `{"exit": code}` to end with.
 */
const SCRIPT = `'use strict';
// pier's pre-receive hook: written by pier (src/runtime/git/hook.ts); do not edit.
const net = require('node:net');
const socketPath = process.env.PIER_PUSH_SOCKET;
if (!socketPath) {
  process.stderr.write('pier: this push did not come through pier; refused\\n');
  process.exit(1);
}
const input = [];
process.stdin.on('data', (c) => input.push(c));
process.stdin.on('end', () => {
  let code;
  let pending = '';
  const sock = net.connect(socketPath, () => {
    const updates = Buffer.concat(input).toString('utf8');
    const quarantine = process.env.GIT_QUARANTINE_PATH || '';
    sock.write(JSON.stringify({ updates, quarantine }) + '\\n');
  });
  sock.setEncoding('utf8');
  sock.on('data', (chunk) => {
    pending += chunk;
    for (let i = pending.indexOf('\\n'); i >= 0; i = pending.indexOf('\\n')) {
      const msg = JSON.parse(pending.slice(0, i));
      pending = pending.slice(i + 1);
      if (typeof msg.say === 'string') process.stderr.write(msg.say);
      if (typeof msg.exit === 'number') code = msg.exit;
    }
  });
  sock.on('error', (err) => {
    process.stderr.write('pier: lost the platform (' + err.message + ')\\n');
  });
  sock.on('close', () => {
    if (code === undefined) process.stderr.write('pier: the platform went away; the push is refused\\n');
    process.exit(code === undefined ? 1 : code);
  });
});
`;

/** The environment receive-pack needs for the hook to reach pier's socket. */
export function hookEnv(socketPath: string): Record<string, string> {
  return { PIER_PUSH_SOCKET: socketPath, PIER_GIT_NODE: process.execPath };
}

async function writeIfChanged(file: string, content: string, mode: number): Promise<void> {
  const now = await readFile(file, 'utf8').catch(() => undefined);
  if (now === content) return;
  // Written beside and renamed: a push running the old hook never reads half a file.
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, content, { mode });
  await rename(tmp, file);
}

const installed = new Map<string, Promise<void>>();

/** Writes the hook into `dir` (once per process and directory); answers `dir`. */
export async function installHooks(dir: string): Promise<string> {
  let p = installed.get(dir);
  if (!p) {
    p = (async () => {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await writeIfChanged(path.join(dir, 'pre-receive.cjs'), SCRIPT, 0o600);
      await writeIfChanged(path.join(dir, 'pre-receive'), WRAPPER, 0o700);
    })();
    installed.set(dir, p);
    p.catch(() => installed.delete(dir));
  }
  await p;
  return dir;
}
