/**
 * Secrets of an app by name (spec 2.8, 4.10): names and metadata, set and delete. Values
 * go one way only: typed into a password field, sent to `PUT /v1/apps/:name/secrets`,
 * never shown back — not in the list (the route never returns them), not refilled in a
 * form, not in a redirect's address. Managed secrets (a database's URL, a bucket's keys)
 * are listed without a delete button; the route refuses to change them.
 */
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { redirect, type PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { enc, ticked } from './form-values.js';
import { when, wide } from './widgets.js';

interface Secret {
  name: string;
  updatedAt: string;
  managed: boolean;
  managedReason?: string;
  build?: boolean;
}

const secretsPath = (app: string) => `/console/secrets/${enc(app)}`;
const v1Path = (app: string) => `/v1/apps/${enc(app)}/secrets`;

function secretsTable(c: PageContext, app: string, secrets: Secret[]): Html {
  if (secrets.length === 0) return html`<p class="muted">No secrets.</p>`;
  return wide(
    html`<table class="secrets">
      <thead>
        <tr>
          <th>Name</th>
          <th>Updated</th>
          <th>Build sees it</th>
          <th>Managed</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${secrets.map(
          (s) =>
            html`<tr data-secret="${s.name}">
              <td><code>${s.name}</code></td>
              <td>${when(s.updatedAt)}</td>
              <td>${s.build ? 'yes' : ''}</td>
              <td>${s.managed ? (s.managedReason ?? 'yes') : ''}</td>
              <td>
                ${
                  s.managed
                    ? ''
                    : html`<form method="post" action="${secretsPath(app)}/delete" class="inline">
                        ${csrfField(c.session.csrf)}<input
                          type="hidden"
                          name="name"
                          value="${s.name}"
                        />
                        <button type="submit" class="danger" data-confirm="Delete ${s.name}?">
                          Delete
                        </button>
                      </form>`
                }
              </td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

const setForm = (c: PageContext, app: string) =>
  html`<form method="post" action="${secretsPath(app)}" class="stack set-secret" autocomplete="off">
    ${csrfField(c.session.csrf)}
    <label>Name <input name="name" required autocomplete="off" /></label>
    <label>Value <input type="password" name="value" required autocomplete="new-password" /></label>
    <label class="check"
      ><input type="checkbox" name="build" /> the next source build sees it</label
    >
    <label class="check"
      ><input type="checkbox" name="now" /> roll the app now if a machine lacks it (default: at the
      next deploy)</label
    >
    <button type="submit" class="primary">Set secret</button>
  </form>`;

export const secretsFamily: PageFamily = {
  nav: [{ key: 'secrets', label: 'Secrets', href: '/console/secrets' }],
  register(router) {
    // Secrets belong to apps: pick one.
    router.page('/console/secrets', async (c) => {
      const apps = await c.api.call<{ name: string }[]>('GET', '/v1/apps');
      return {
        title: 'Secrets',
        nav: 'secrets',
        styles: [c.assets.url('data.css')],
        body: apps.length
          ? html`<p>Secrets belong to an app:</p>
              <ul class="apps">
                ${apps.map((a) => html`<li><a href="${secretsPath(a.name)}">${a.name}</a></li>`)}
              </ul>`
          : html`<p class="muted">No apps yet: secrets belong to an app.</p>`,
        commands: [
          { pier: 'pier secrets list <app>', method: 'GET', path: '/v1/apps/<app>/secrets' },
        ],
      };
    });

    router.page('/console/secrets/:app', async (c) => {
      const app = c.params.app!;
      const secrets = await c.api.call<Secret[]>('GET', v1Path(app));
      return {
        title: `Secrets of ${app}`,
        nav: 'secrets',
        styles: [c.assets.url('data.css')],
        body: html`${secretsTable(c, app, secrets)}
          <h2>Set a secret</h2>
          ${setForm(c, app)}`,
        commands: [
          { pier: `pier secrets list ${app}`, method: 'GET', path: v1Path(app) },
          {
            pier: `pier secrets set ${app} NAME=-`,
            method: 'PUT',
            path: v1Path(app),
            body: { secrets: { NAME: '<value>' } },
          },
          { pier: `pier secrets unset ${app} NAME`, method: 'DELETE', path: `${v1Path(app)}/NAME` },
        ],
      };
    });

    router.action('/console/secrets/:app', async (c) => {
      const app = c.params.app!;
      const name = c.form.name ?? '';
      const body: Record<string, unknown> = {
        secrets: { [name]: c.form.value ?? '' },
        staged: !ticked(c.form.now),
      };
      if (ticked(c.form.build)) body.build = { [name]: true };
      await c.api.call('PUT', v1Path(app), { body });
      return redirect(secretsPath(app));
    });

    router.action('/console/secrets/:app/delete', async (c) => {
      const app = c.params.app!;
      await c.api.call('DELETE', `${v1Path(app)}/${enc(c.form.name ?? '')}`);
      return redirect(secretsPath(app));
    });
  },
};
