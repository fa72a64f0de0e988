/**
 * The "equivalent command" of a page: the `pier` command and the `curl` line of the
 * `/v1` call the page makes, so a person can script what they just clicked.
 */
import { html, type Html } from './html.js';

export interface Equivalent {
  /** The CLI command, if the CLI has one. */
  pier?: string;
  method: string;
  /** Path and query of the route, e.g. `/v1/apps/web/machines`. */
  path: string;
  /** The JSON body the page sends. */
  body?: unknown;
}

/** Single-quotes a word for a POSIX shell. */
function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export function curlLine(e: Equivalent): string {
  const parts = ['curl'];
  if (e.method !== 'GET') parts.push('-X', e.method);
  parts.push(`"$PIER_API_URL${e.path}"`, '-H', '"Authorization: Bearer $PIER_TOKEN"');
  if (e.body !== undefined) {
    parts.push('-H', 'content-type:application/json', '-d', shellQuote(JSON.stringify(e.body)));
  }
  return parts.join(' ');
}

export function equivalentPanel(list: Equivalent[]): Html {
  if (list.length === 0) return html``;
  return html`<aside class="equivalent" aria-label="Equivalent commands">
    <h2>Equivalent commands</h2>
    ${list.map(
      (e) =>
        html`${e.pier ? html`<pre class="cmd"><code>${e.pier}</code></pre>` : ''}
          <pre class="cmd"><code>${curlLine(e)}</code></pre>`,
    )}
  </aside>`;
}
