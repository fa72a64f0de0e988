/**
 * An app's (or one machine's) console output, following live: the page shows the last
 * lines, then a poller element asks `GET /v1/apps/:name/logs` again with the cursor of
 * the last answer every second and puts the new lines before itself (htmx), so no line
 * is fetched twice and none is skipped. Without JS the page still shows the last lines.
 */
import type { AppLogs } from '../../contracts/machines.js';
import { html, type Html } from '../html.js';
import { fragment, type ConsoleRouter, type PageContext } from '../router.js';

const enc = encodeURIComponent;

async function readLogs(c: PageContext, app: string, machine?: string, cursor?: string) {
  return c.api.call<AppLogs>('GET', `/v1/apps/${enc(app)}/logs`, {
    query: { machine, cursor, limit: '200' },
  });
}

function lines(logs: AppLogs): Html {
  return html`${logs.entries.map(
    (e) => html`<div class="line ${e.stream}" data-machine="${e.machineId}">${e.text}</div>`,
  )}`;
}

function poller(app: string, cursor: string, machine?: string): Html {
  const q = new URLSearchParams({ cursor, ...(machine ? { machine } : {}) });
  return html`<div
    class="poller"
    hx-get="/console/apps/${enc(app)}/logs/lines?${q.toString()}"
    hx-trigger="load delay:1s"
    hx-swap="outerHTML"
  ></div>`;
}

/** The logs box of a page: the last lines and the poller that follows them. */
export async function logsFollower(c: PageContext, app: string, machine?: string) {
  const logs = await readLogs(c, app, machine);
  return html`<div class="log-lines" id="logs">
    ${lines(logs)}${poller(app, logs.cursor, machine)}
  </div>`;
}

export function logsRoutes(router: ConsoleRouter): void {
  router.page('/console/apps/:name/logs/lines', async (c) => {
    const app = c.params.name!;
    const logs = await readLogs(c, app, c.query.machine, c.query.cursor);
    return fragment(html`${lines(logs)}${poller(app, logs.cursor, c.query.machine)}`);
  });
}
