/**
 * The console's static files: htmx and xterm.js from node_modules, and the console's own
 * script and style (./static). Read once at start, served from memory under
 * `/console/assets/<hash>/<name>`: the hash of the contents is in the URL, so browsers
 * may cache them for a year, and a new version gets a new URL.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const own = (name: string) => fileURLToPath(new URL(`./static/${name}`, import.meta.url));

/** Public name → file. */
const FILES: Record<string, string> = {
  'htmx.min.js': require.resolve('htmx.org/dist/htmx.min.js'),
  'xterm.js': require.resolve('@xterm/xterm/lib/xterm.js'),
  'xterm.css': require.resolve('@xterm/xterm/css/xterm.css'),
  'addon-fit.js': require.resolve('@xterm/addon-fit/lib/addon-fit.js'),
  'console.css': own('console.css'),
  'console.js': own('console.js'),
  'terminal.js': own('terminal.js'),
  'data.js': own('data.js'),
  'data.css': own('data.css'),
};

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

export interface Asset {
  body: Buffer;
  type: string;
}

export class Assets {
  readonly version: string;
  private readonly byName = new Map<string, Asset>();

  constructor() {
    const hash = createHash('sha256');
    for (const [name, file] of Object.entries(FILES)) {
      const body = readFileSync(file);
      hash.update(name).update(body);
      this.byName.set(name, { body, type: TYPES[name.slice(name.lastIndexOf('.') + 1)]! });
    }
    this.version = hash.digest('hex').slice(0, 12);
  }

  url(name: keyof typeof FILES & string): string {
    if (!this.byName.has(name)) throw new Error(`no console asset ${name}`);
    return `/console/assets/${this.version}/${name}`;
  }

  get(version: string, name: string): Asset | undefined {
    return version === this.version ? this.byName.get(name) : undefined;
  }
}
