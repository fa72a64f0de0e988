// Finds a route of the API and prints where it is declared, with its auth row, its
// schemas (from src/contracts/) and the service it calls: the way from a line of the spec
// to the code. Usage: npm run route -- GET /v1/apps/:name   (or any part of a path)
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const args = process.argv.slice(2);
const method = /^(get|post|put|patch|delete|head)$/i.test(args[0] ?? '')
  ? args.shift().toLowerCase()
  : undefined;
const wanted = args.join(' ').trim();
if (!wanted) {
  console.error('usage: npm run route -- [METHOD] PATH   e.g. npm run route -- GET /v1/apps/:name');
  process.exit(2);
}

function walk(dir, out = []) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

// A route is declared as `app.<method>('<path>', {` (or `root.route({ method, url })`).
const declaration =
  /\b(?:app|root|api|s3|scope)\.(get|post|put|patch|delete|head)\(\s*['`]([^'`]+)['`]/;
const routeCall = /\.route\(\{/;

/** Every declaration: [method, path, file, line index, lines of the file]. */
const routes = [];
for (const file of walk(path.join(root, 'src', 'http'))) {
  const lines = readFileSync(file, 'utf8').split('\n');
  lines.forEach((line, i) => {
    const m = declaration.exec(line);
    if (m) return routes.push([m[1], m[2], file, i, lines]);
    if (!routeCall.test(line)) return;
    const near = lines.slice(i, i + 6).join(' ');
    const url = /url:\s*['`]([^'`]+)['`]/.exec(near);
    const verb = /method:\s*\[?\s*['`]([A-Z]+)['`]/.exec(near);
    if (url) routes.push([(verb?.[1] ?? 'get').toLowerCase(), url[1], file, i, lines]);
  });
}
const matching = routes.filter(([m, p]) => (!method || m === method) && p.includes(wanted));
const exact = matching.filter(([, p]) => p === wanted);
let found = 0;
for (const [verb, url, file, i, lines] of exact.length ? exact : matching) {
  {
    const line = lines[i];
    const m = [line, verb, url];
    found++;
    // The declaration's block: up to the line that closes it at the same indentation.
    const indent = line.search(/\S/);
    let end = i + 1;
    while (
      end < lines.length &&
      !(lines[end].search(/\S/) === indent && /^\s*\}\);?/.test(lines[end]))
    )
      end++;
    const block = lines.slice(i, Math.min(end + 1, i + 40));
    const pick = (rx) => block.filter((l) => rx.test(l)).map((l) => l.trim());
    console.log(`${m[1].toUpperCase()} ${m[2]}\n  at     ${path.relative(root, file)}:${i + 1}`);
    for (const l of pick(/auth:/)) console.log(`  auth   ${l}`);
    for (const l of pick(/\b(params|body|querystring|response|200|201|202):/))
      console.log(`  schema ${l}`);
    for (const l of pick(/handler|await [a-zA-Z]+\(ctx/)) console.log(`  calls  ${l}`);
    console.log('');
  }
}
if (!found) {
  console.error(`no route matches ${method ? method.toUpperCase() + ' ' : ''}${wanted}`);
  process.exit(1);
}
