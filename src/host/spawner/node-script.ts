/**
 * How to start one of pier's own scripts in a Node process of its own: the compiled
 * `<name>.js` next to the caller, or, when pier runs from its TypeScript sources (tests,
 * `tsx`), `<name>.ts` through tsx's loader. V8's heap is kept small: such a process
 * holds nothing but a few buffers.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Node's arguments for script `name` in the folder of the module at `callerUrl`. */
export function nodeScriptArgv(callerUrl: string, name: string, heapMb = 32): string[] {
  const here = fileURLToPath(callerUrl);
  const ext = path.extname(here);
  const script = path.join(path.dirname(here), `${name}${ext}`);
  const loader =
    ext === '.ts' ? ['--import', pathToFileURL(createRequire(callerUrl).resolve('tsx')).href] : [];
  return [...loader, `--max-old-space-size=${heapMb}`, '--max-semi-space-size=1', script];
}
