/**
 * pier compiled to JavaScript for the machine benchmarks, in a temp dir of its own, so
 * that `pier serve` runs as it does in production (`node dist/cli/entry.js`), and so do
 * the per-machine keepers it spawns: from TypeScript sources they would start through
 * tsx's loader, which costs a keeper tens of ms and MBs it never has in production.
 *
 * The repository's `dist/` is not used: other work may be rebuilding it, or it may be
 * older than `src/`. Every `src/**.ts` (tests and test helpers aside) goes through
 * TypeScript's `transpileModule` with the project's target (what `tsc` emits, without the
 * type check: ~3 s); the migrations are copied as `npm run build` does; `node_modules` is
 * a symlink to the repository's. One build per benchmark process, removed at its exit.
 */
import { rmSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let built: Promise<string> | undefined;

/** The path of the compiled `cli/entry.js` (the `pier` binary), building it on first call. */
export function pierEntry(): Promise<string> {
  built ??= build().catch((err: unknown) => {
    built = undefined;
    throw err;
  });
  return built;
}

async function build(): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pier-bench-build-'));
  process.once('exit', () => rmSync(root, { recursive: true, force: true }));
  const src = path.join(repo, 'src');
  const out = path.join(root, 'dist');
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.ESNext,
    esModuleInterop: true,
    sourceMap: false,
  };
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        await walk(file);
        continue;
      }
      if (!/\.ts$/.test(entry.name) || /\.(test|test-helper|d)\.ts$/.test(entry.name)) continue;
      const { outputText } = ts.transpileModule(await readFile(file, 'utf8'), {
        fileName: file,
        compilerOptions: options,
      });
      const dest = path.join(out, path.relative(src, file)).replace(/\.ts$/, '.js');
      await mkdir(path.dirname(dest), { recursive: true });
      await writeFile(dest, outputText);
    }
  };
  await walk(src);
  // What tsc does not compile, as scripts/copy-assets.js copies it for `npm run build`.
  for (const dir of ['store/migrations', 'console/static']) {
    await cp(path.join(src, dir), path.join(out, dir), { recursive: true });
  }
  await writeFile(path.join(root, 'package.json'), '{"type":"module"}\n');
  await symlink(path.join(repo, 'node_modules'), path.join(root, 'node_modules'));
  return path.join(out, 'cli/entry.js');
}
