/**
 * A layer holding some of the host's own dynamically linked programs (`psql`,
 * `redis-cli`, `curl` …) with every shared library `ldd` says they load, at the paths the
 * loader looks for them. Put on top of `busyboxLayer()`, it gives a test machine real
 * clients without any distribution image or package manager:
 *
 *   const layers = [busyboxLayer(), hostBinariesLayer(['/usr/bin/redis-cli'])];
 *
 * A program keeps its host path (`/usr/bin/redis-cli`); `binDir` adds a symlink to each
 * in one directory of `PATH`. Libraries are copied as files (their symlinks resolved).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { LayerEntry } from './layer.test-helper.js';

/** The absolute paths of what `ldd` lists for `binary` (libraries and the loader). */
function sharedLibraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  const libs: string[] = [];
  for (const line of out.split('\n')) {
    // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)`, or `/lib64/ld-linux… (0x…)`.
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    if (m?.[1]) libs.push(m[1]);
  }
  return libs;
}

/** The directories leading to `file` (`usr/`, `usr/bin/`), outermost first. */
function parents(file: string): string[] {
  const dirs: string[] = [];
  for (let d = path.posix.dirname(file); d !== '.' && d !== '/'; d = path.posix.dirname(d)) {
    dirs.unshift(`${d}/`);
  }
  return dirs;
}

/**
 * A layer of `binaries` (absolute host paths) and their libraries. With `binDir`
 * (`usr/local/bin`), each binary is also linked there by its base name.
 */
export function hostBinariesLayer(binaries: string[], binDir?: string): LayerEntry[] {
  const files = new Set<string>();
  for (const b of binaries) {
    files.add(b);
    for (const lib of sharedLibraries(b)) files.add(lib);
  }
  const entries: LayerEntry[] = [];
  const dirs = new Set<string>();
  const addDirs = (p: string) => {
    for (const d of parents(p)) {
      if (!dirs.has(d)) entries.push({ path: d, type: 'dir' });
      dirs.add(d);
    }
  };
  for (const f of [...files].sort()) {
    const rel = f.replace(/^\/+/, '');
    addDirs(rel);
    entries.push({ path: rel, content: readFileSync(realpathSync(f)), mode: 0o755 });
  }
  if (binDir) {
    for (const b of binaries) {
      const link = `${binDir.replace(/^\/+|\/+$/g, '')}/${path.basename(b)}`;
      addDirs(link);
      entries.push({ path: link, type: 'symlink', target: b });
    }
  }
  return entries;
}
