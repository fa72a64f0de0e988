// Checks the layering of src/ (docs/architecture.md, "Layers"): every import goes from a
// higher layer to a lower one, or stays inside its own folder; the command-line client
// reaches the server only through the contracts; and no files import each other in a
// circle. Tests and test helpers are left out: they may reach anything.
// Run: node scripts/check-layers.js (part of `npm test`). Exit 1 with every finding.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'src');

// Rank of each top-level part of src/: an import must go to a strictly lower rank, or stay
// inside its own part. Parts of equal rank are siblings and do not import each other.
export const LAYERS = [
  ['cli', 8],
  ['platform.ts', 7],
  ['http', 6],
  // The web console calls the API in process (app.inject) and imports only contracts (and
  // host/address-key.ts, to key failed sign-ins by address).
  ['console', 5.5],
  // The SSH gateway: logins, shells and forwards of a stock ssh client, on the services.
  ['ssh-gateway', 5.2],
  ['proxy', 5],
  // The OAuth server for hosted MCP clients: services of its own, above the key services.
  ['oauth', 4.5],
  ['services', 4],
  ['jobs', 3],
  ['store', 2],
  ['runtime', 2],
  ['engines', 2],
  ['objects', 2],
  ['storage', 1.5],
  ['host', 1],
  // The edge's primitives: ACME orders, DNS questions, the TLS listener, host-name rules.
  ['edge', 1.2],
  ['ssh', 0.5],
  ['crypto', 0.2],
  ['contracts', 0],
  ['errors', 0],
  ['config.ts', 0],
];
const rank = new Map(LAYERS);

// The command-line client talks to the server over HTTP: of the server's code it may take
// only the contracts (types and schemas), never services or drivers.
const CLIENT = 'cli/client/';
const CLIENT_MAY_IMPORT = ['contracts/'];

// Circles we accept, each with its reason (none today).
const ACCEPTED_CIRCLES = [];

function walk(dir, out = []) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (/\.ts$/.test(e.name) && !/\.(test|test-helper)\.ts$/.test(e.name)) out.push(p);
  }
  return out;
}

const importRx =
  /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s*)?['"](\.{1,2}\/[^'"]+)['"]/g;
const dynamicRx = /\bimport\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

/** The relative imports of a file, as paths of src/ files (`.js` specifiers → `.ts`). */
export function importsOf(file, text) {
  const out = new Set();
  for (const rx of [importRx, dynamicRx]) {
    for (const m of text.matchAll(rx)) {
      const target = path.resolve(path.dirname(file), m[1]).replace(/\.js$/, '.ts');
      out.add(path.relative(root, target));
    }
  }
  return [...out];
}

const part = (rel) => (rel.includes('/') ? rel.slice(0, rel.indexOf('/')) : rel);

const files = walk(root).map((f) => path.relative(root, f));
const graph = new Map();
const problems = [];
for (const rel of files) {
  const deps = importsOf(path.join(root, rel), readFileSync(path.join(root, rel), 'utf8'));
  graph.set(rel, deps);
  const from = part(rel);
  if (!rank.has(from)) problems.push(`${rel}: src/${from} has no layer in scripts/check-layers.js`);
  for (const dep of deps) {
    const to = part(dep);
    if (rel.startsWith(CLIENT)) {
      if (!dep.startsWith(CLIENT) && !CLIENT_MAY_IMPORT.some((p) => dep.startsWith(p)))
        problems.push(`${rel} → ${dep}: the CLI client may import only ${CLIENT_MAY_IMPORT}`);
      continue;
    }
    if (from === to) continue;
    if (!rank.has(to)) continue; // reported for the file itself
    if (rank.get(to) >= rank.get(from))
      problems.push(
        `${rel} → ${dep}: src/${from} (layer ${rank.get(from)}) may not import src/${to} (layer ${rank.get(to)})`,
      );
  }
}

// Tarjan's strongly connected components: every group of two or more files is a circle.
let index = 0;
const stack = [];
const info = new Map();
const circles = [];
function connect(v) {
  info.set(v, { index, low: index, on: true });
  index++;
  stack.push(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!info.has(w)) {
      connect(w);
      info.get(v).low = Math.min(info.get(v).low, info.get(w).low);
    } else if (info.get(w).on) info.get(v).low = Math.min(info.get(v).low, info.get(w).index);
  }
  if (info.get(v).low === info.get(v).index) {
    const group = [];
    let w;
    do {
      w = stack.pop();
      info.get(w).on = false;
      group.push(w);
    } while (w !== v);
    if (group.length > 1) circles.push(group.sort());
  }
}
for (const v of graph.keys()) if (!info.has(v)) connect(v);
for (const c of circles) {
  const accepted = ACCEPTED_CIRCLES.some((a) => a.files.every((f) => c.includes(f)));
  if (!accepted) problems.push(`import circle: ${c.join(' ↔ ')}`);
}

if (problems.length) {
  console.error(`check-layers: ${problems.length} problem(s)\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`check-layers: ${files.length} files, no upward import, no circle`);
