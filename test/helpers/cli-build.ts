/**
 * The CLI tests run the real `pier` binary hundreds of times. Through tsx each start
 * costs about 1.1 s of CPU (its loader and transforms); the sources transpiled once, file
 * by file as tsc would, start in about 0.5 s. So the run transpiles `src/` with esbuild
 * (tsx's own compiler, a second or two) into a directory of its own, and the CLI tests
 * start `cli/entry.js` there: always the sources of this run, never a stale `dist/`.
 */
import { readdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';

/** Transpiles `src/` (no tests) into `outDir`; answers the CLI's entry file there. */
export async function buildCli(outDir: string): Promise<string> {
  const src = path.resolve('src');
  const entryPoints = readdirSync(src, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !/\.test(-helper)?\.ts$/.test(f))
    .map((f) => path.join(src, f));
  await rm(outDir, { recursive: true, force: true });
  await build({
    entryPoints,
    outdir: outDir,
    outbase: src,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'warning',
  });
  return path.join(outDir, 'cli', 'entry.js');
}
