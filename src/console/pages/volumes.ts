/**
 * Volumes (spec 2.6, 4.4): the list with the app each is attached to, create, resize,
 * attach to an app (the app's attach route, as `pier volumes attach` does), detach and
 * delete (refused by the route while attached: its sentence shows).
 */
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { redirect, type PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { enc, wholeNumber } from './form-values.js';
import { when, wide } from './widgets.js';

interface Volume {
  id: string;
  name: string;
  sizeGb: number;
  mountPath: string;
  class: string;
  flushIntervalS: number;
  appName?: string;
  machineId?: string;
  durableAt?: string;
  createdAt: string;
}

const volumePath = (id: string) => `/console/volumes/${enc(id)}`;

function button(c: PageContext, action: string, label: string, confirm?: string): Html {
  return html`<form method="post" action="${action}" class="inline">
    ${csrfField(c.session.csrf)}
    <button
      type="submit"
      class="${confirm ? 'danger' : ''}"
      ${confirm ? html`data-confirm="${confirm}"` : ''}
    >
      ${label}
    </button>
  </form>`;
}

function attachment(c: PageContext, v: Volume): Html {
  if (v.appName)
    return html`<a href="/console/apps/${enc(v.appName)}">${v.appName}</a>
      ${button(c, `${volumePath(v.id)}/detach`, 'Detach', `Detach ${v.name} from ${v.appName}?`)}`;
  return html`<form method="post" action="${volumePath(v.id)}/attach" class="inline">
    ${csrfField(c.session.csrf)}<input type="hidden" name="volume" value="${v.name}" />
    <input name="app" placeholder="app name" required size="12" />
    <button type="submit">Attach</button>
  </form>`;
}

function volumesTable(c: PageContext, volumes: Volume[]): Html {
  if (volumes.length === 0) return html`<p class="muted">No volumes.</p>`;
  return wide(
    html`<table class="volumes">
      <thead>
        <tr>
          <th>Volume</th>
          <th>Size (GB)</th>
          <th>Mount path</th>
          <th>Class</th>
          <th>Last durable copy</th>
          <th>App</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${volumes.map(
          (v) =>
            html`<tr data-volume="${v.name}">
              <td title="${v.id}">${v.name}</td>
              <td>
                <form method="post" action="${volumePath(v.id)}/resize" class="inline">
                  ${csrfField(c.session.csrf)}
                  <input name="sizeGb" value="${v.sizeGb}" size="4" inputmode="numeric" />
                  <button type="submit">Resize</button>
                </form>
              </td>
              <td><code>${v.mountPath}</code></td>
              <td>${v.class}</td>
              <td>${when(v.durableAt)}</td>
              <td>${attachment(c, v)}</td>
              <td>
                ${button(c, `${volumePath(v.id)}/delete`, 'Delete', `Delete ${v.name} and its data?`)}
              </td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

const createForm = (c: PageContext) =>
  html`<form method="post" action="/console/volumes" class="stack create-volume">
    ${csrfField(c.session.csrf)}
    <label>Name <input name="name" required /></label>
    <label>Size in GB (default 10) <input name="sizeGb" inputmode="numeric" /></label>
    <label>Mount path (default /data) <input name="mountPath" /></label>
    <label
      >Class
      <select name="class">
        <option value="standard">standard</option>
        <option value="durable">durable</option>
      </select></label
    >
    <label
      >Seconds between durable copies (optional) <input name="flushIntervalS" inputmode="numeric"
    /></label>
    <button type="submit" class="primary">Create volume</button>
  </form>`;

export const volumesFamily: PageFamily = {
  nav: [{ key: 'volumes', label: 'Volumes', href: '/console/volumes' }],
  register(router) {
    router.page('/console/volumes', async (c) => {
      const volumes = await c.api.call<Volume[]>('GET', '/v1/volumes');
      return {
        title: 'Volumes',
        nav: 'volumes',
        styles: [c.assets.url('data.css')],
        body: html`${volumesTable(c, volumes)}
          <h2>Create a volume</h2>
          ${createForm(c)}`,
        commands: [
          { pier: 'pier volumes list', method: 'GET', path: '/v1/volumes' },
          {
            pier: 'pier volumes create <name> --size 10',
            method: 'POST',
            path: '/v1/volumes',
            body: { name: '<name>', sizeGb: 10 },
          },
          {
            pier: 'pier volumes attach <volume> <app>',
            method: 'POST',
            path: '/v1/apps/<app>/attach',
            body: { volume: '<volume>' },
          },
        ],
      };
    });

    router.action('/console/volumes', async (c) => {
      const body: Record<string, unknown> = {
        name: c.form.name ?? '',
        class: c.form.class || undefined,
      };
      for (const field of ['sizeGb', 'flushIntervalS'] as const) {
        const n = wholeNumber(c.form[field]);
        if (n !== undefined) body[field] = n;
      }
      if (c.form.mountPath?.trim()) body.mountPath = c.form.mountPath.trim();
      await c.api.call('POST', '/v1/volumes', { body });
      return redirect('/console/volumes');
    });

    router.action('/console/volumes/:id/resize', async (c) => {
      const body = { sizeGb: wholeNumber(c.form.sizeGb) ?? '' };
      await c.api.call('PATCH', `/v1/volumes/${enc(c.params.id!)}`, { body });
      return redirect('/console/volumes');
    });

    router.action('/console/volumes/:id/attach', async (c) => {
      const app = c.form.app?.trim() ?? '';
      await c.api.call('POST', `/v1/apps/${enc(app)}/attach`, {
        body: { volume: c.form.volume ?? '' },
      });
      return redirect('/console/volumes');
    });

    router.action('/console/volumes/:id/detach', async (c) => {
      await c.api.call('DELETE', `/v1/volumes/${enc(c.params.id!)}/attachment`);
      return redirect('/console/volumes');
    });

    router.action('/console/volumes/:id/delete', async (c) => {
      await c.api.call('DELETE', `/v1/volumes/${enc(c.params.id!)}`);
      return redirect('/console/volumes');
    });
  },
};
