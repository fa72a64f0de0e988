/** A terminal in the browser (xterm.js) on the machine's shell; see ../terminal-relay.ts. */
import type { Machine } from '../../contracts/machines.js';
import { html } from '../html.js';
import type { ConsoleRouter } from '../router.js';

const enc = encodeURIComponent;

export function terminalPage(router: ConsoleRouter): void {
  router.page('/console/machines/:id/terminal', async (c) => {
    const id = c.params.id!;
    // Read first: a machine of another organization is a 404 page, like a missing one.
    const m = await c.api.call<Machine>('GET', `/v1/machines/${enc(id)}`);
    return {
      title: `Terminal · ${m.id}`,
      nav: 'apps',
      styles: [c.assets.url('xterm.css')],
      scripts: [
        c.assets.url('xterm.js'),
        c.assets.url('addon-fit.js'),
        c.assets.url('terminal.js'),
      ],
      body: html`<p>
          <a href="/console/machines/${enc(m.id)}">${m.id}</a> of app ${m.appName} ·
          <span id="terminal-status">needs JavaScript</span>
        </p>
        <div id="terminal" data-ws-path="/console/ws/machines/${enc(m.id)}/exec"></div>`,
      commands: [
        {
          pier: `pier machines exec ${m.id}`,
          method: 'GET',
          path: `/v1/machines/${enc(m.id)}/exec (WebSocket)`,
        },
      ],
    };
  });
}
