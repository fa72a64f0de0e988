/**
 * Apps and their machines (CONTRACT 3, spec 4.9): the list with every app's machines,
 * create an app, run a machine from an image, start / stop / suspend / destroy, a
 * machine's page with its logs following live (htmx polls the logs route with its
 * cursor), and a terminal (terminal.ts).
 */
import type { Machine } from '../../contracts/machines.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { fragment, redirect, type PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { logsFollower, logsRoutes } from './logs.js';
import { terminalPage } from './terminal.js';

interface App {
  name: string;
  createdAt: string;
}

const ACTIONS = ['start', 'stop', 'suspend', 'destroy'] as const;
const enc = encodeURIComponent;

export const appPath = (name: string) => `/console/apps/${enc(name)}`;
export const machinePath = (id: string) => `/console/machines/${enc(id)}`;

function liveness(m: Machine): Html {
  if (!m.liveness) return html`<span class="muted">—</span>`;
  return html`<span class="live-${m.liveness}" title="${m.livenessReason ?? ''}"
    >${m.liveness}</span
  >`;
}

function actionButtons(c: PageContext, m: Machine): Html {
  return html`<span class="actions">
    ${ACTIONS.map(
      (a) =>
        html`<form method="post" action="${machinePath(m.id)}/${a}">
          ${csrfField(c.session.csrf)}
          <button
            type="submit"
            class="${a === 'destroy' ? 'danger' : ''}"
            data-action="${a}"
            ${a === 'destroy' ? html`data-confirm="Destroy machine ${m.id}?"` : ''}
          >
            ${a}
          </button>
        </form>`,
    )}
  </span>`;
}

export function machinesTable(c: PageContext, machines: Machine[], withActions: boolean): Html {
  if (machines.length === 0) return html`<p class="muted">No machines.</p>`;
  return html`<table class="machines">
    <thead>
      <tr>
        <th>Machine</th>
        <th>State</th>
        <th>Region</th>
        <th>Private address</th>
        <th>Liveness</th>
        ${withActions ? html`<th></th>` : ''}
      </tr>
    </thead>
    <tbody>
      ${machines.map(
        (m) =>
          html`<tr data-machine="${m.id}">
            <td><a href="${machinePath(m.id)}">${m.id}</a></td>
            <td class="state state-${m.observedState}">${m.observedState}</td>
            <td>${m.region}</td>
            <td><code>${m.privateIp ?? '—'}</code></td>
            <td>${liveness(m)}</td>
            ${withActions ? html`<td>${actionButtons(c, m)}</td>` : ''}
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** The machines table of an app page, refreshed by htmx every few seconds. */
function liveMachines(c: PageContext, app: string, machines: Machine[]): Html {
  return html`<div
    id="machines"
    hx-get="${appPath(app)}/machines"
    hx-trigger="every 3s"
    hx-swap="outerHTML"
  >
    ${machinesTable(c, machines, true)}
  </div>`;
}

const createAppForm = (c: PageContext) =>
  html`<form method="post" action="/console/apps" class="stack create-app">
    ${csrfField(c.session.csrf)}
    <label>New app name <input name="name" required pattern="[a-z0-9-]{1,63}" /></label>
    <button type="submit" class="primary">Create app</button>
  </form>`;

const runForm = (c: PageContext, app: string) =>
  html`<form method="post" action="${appPath(app)}/machines" class="stack run-machine">
    ${csrfField(c.session.csrf)}
    <label>Image <input name="image" required placeholder="registry.example/app:1" /></label>
    <label>Start command (optional, run by /bin/sh -c) <input name="start" /></label>
    <label>Port (optional) <input name="internalPort" inputmode="numeric" /></label>
    <button type="submit" class="primary">Run machine</button>
  </form>`;

export const appsFamily: PageFamily = {
  nav: [{ key: 'apps', label: 'Apps', href: '/console/apps' }],
  register(router) {
    router.page('/console/apps', async (c) => {
      const apps = await c.api.call<App[]>('GET', '/v1/apps');
      return {
        title: 'Apps',
        nav: 'apps',
        // Each app's machines come in as its section scrolls into view (one route call
        // each): the page itself is one call, however many apps the organization has.
        body: html`${createAppForm(c)}
        ${apps.length === 0 ? html`<p class="muted">No apps yet.</p>` : ''}
        ${apps.map(
          (a) =>
            html`<section class="app" data-app="${a.name}">
              <h2><a href="${appPath(a.name)}">${a.name}</a></h2>
              <div
                class="app-machines"
                hx-get="${appPath(a.name)}/machines?view=list"
                hx-trigger="revealed"
              >
                <a href="${appPath(a.name)}">Machines</a>
              </div>
            </section>`,
        )}`,
        commands: [
          { pier: 'pier apps list', method: 'GET', path: '/v1/apps' },
          { pier: 'pier machines list <app>', method: 'GET', path: '/v1/apps/<app>/machines' },
        ],
      };
    });

    router.action('/console/apps', async (c) => {
      const name = c.form.name ?? '';
      await c.api.call('POST', '/v1/apps', { body: { name } });
      return redirect(appPath(name));
    });

    router.page('/console/apps/:name', async (c) => {
      const name = c.params.name!;
      const app = await c.api.call<App>('GET', `/v1/apps/${enc(name)}`);
      const machines = await c.api.call<Machine[]>('GET', `/v1/apps/${enc(name)}/machines`);
      return {
        title: `App ${app.name}`,
        nav: 'apps',
        body: html`<p>
            <a href="${appPath(name)}/deploys">Deploys, builds and releases</a> ·
            <a href="${appPath(name)}/previews">Git push and previews</a> ·
            <a href="${appPath(name)}/edge">Protection, network policy and UDP endpoints</a> ·
            <a href="${appPath(name)}/domains">Custom domains</a>
          </p>
          <h2>Machines</h2>
          ${liveMachines(c, name, machines)}
          <h2>Run a machine</h2>
          ${runForm(c, name)}
          <h2>Logs</h2>
          ${await logsFollower(c, name)}`,
        commands: [
          {
            pier: `pier machines list ${name}`,
            method: 'GET',
            path: `/v1/apps/${enc(name)}/machines`,
          },
          {
            pier: `pier machines run ${name} <image>`,
            method: 'POST',
            path: `/v1/apps/${enc(name)}/machines?wait=false`,
            body: { image: '<image>' },
          },
        ],
      };
    });

    router.page('/console/apps/:name/machines', async (c) => {
      const name = c.params.name!;
      const machines = await c.api.call<Machine[]>('GET', `/v1/apps/${enc(name)}/machines`);
      // `view=list`: the apps page's plain table; else the app page's live one.
      if (c.query.view === 'list') return fragment(machinesTable(c, machines, false));
      return fragment(liveMachines(c, name, machines));
    });

    router.action('/console/apps/:name/machines', async (c) => {
      const name = c.params.name!;
      const port = c.form.internalPort?.trim();
      const body: Record<string, unknown> = { image: c.form.image ?? '' };
      if (c.form.start?.trim()) body.start = c.form.start.trim();
      // A port that is not a number goes to the route as is: its 400 names the field.
      if (port) body.internalPort = /^\d+$/.test(port) ? Number(port) : port;
      await c.api.call('POST', `/v1/apps/${enc(name)}/machines`, {
        body,
        query: { wait: 'false' },
      });
      return redirect(appPath(name));
    });

    router.page('/console/machines/:id', async (c) => {
      const id = c.params.id!;
      const m = await c.api.call<Machine>('GET', `/v1/machines/${enc(id)}`);
      return {
        title: `Machine ${m.id}`,
        nav: 'apps',
        body: html`<p>
            App <a href="${appPath(m.appName)}">${m.appName}</a> ·
            <a href="${machinePath(m.id)}/terminal">Open a terminal</a>
          </p>
          ${machinesTable(c, [m], true)}
          <dl class="facts">
            <dt>Image</dt>
            <dd><code>${m.config.image}</code></dd>
            <dt>Created</dt>
            <dd>${m.createdAt}</dd>
            ${
              m.createError
                ? html`<dt>Create error</dt>
                    <dd>${m.createError}</dd>`
                : ''
            }
          </dl>
          <h2>Logs</h2>
          ${await logsFollower(c, m.appName, m.id)}`,
        commands: [
          { pier: `pier machines show ${m.id}`, method: 'GET', path: `/v1/machines/${enc(m.id)}` },
          {
            pier: `pier machines stop ${m.id}`,
            method: 'POST',
            path: `/v1/machines/${enc(m.id)}/stop`,
          },
          {
            pier: `pier machines logs ${m.appName} --machine ${m.id} -f`,
            method: 'GET',
            path: `/v1/apps/${enc(m.appName)}/logs?machine=${enc(m.id)}`,
          },
        ],
      };
    });

    for (const action of ACTIONS) {
      router.action(`/console/machines/:id/${action}`, async (c) => {
        const id = c.params.id!;
        const m = await c.api.call<Machine>('POST', `/v1/machines/${enc(id)}/${action}`);
        return redirect(action === 'destroy' ? appPath(m.appName) : machinePath(m.id));
      });
    }

    logsRoutes(router);
    terminalPage(router);
  },
};
