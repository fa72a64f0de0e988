/**
 * An app's previews page (issue #26 item 3): its preview environments with their state,
 * address, release, database branches and expiry; a form to make one; a delete button on
 * each. The list refreshes itself (htmx, every 2 s) while a preview is being made. Every
 * read and action is the `/v1` route's.
 */
import type { Preview } from '../../contracts/previews.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { fragment, redirect, type PageContext } from '../router.js';
import { appPath } from './apps.js';
import type { PageFamily } from './family.js';
import { when, wide } from './widgets.js';

const enc = encodeURIComponent;
const previewsPath = (app: string) => `${appPath(app)}/previews`;

function previewsTable(c: PageContext, app: string, list: Preview[]): Html {
  if (list.length === 0) {
    return html`<p class="muted">No previews yet.</p>`;
  }
  return wide(
    html`<table class="previews">
      <thead>
        <tr>
          <th>Preview</th>
          <th>State</th>
          <th>Address</th>
          <th>Release</th>
          <th>Database branches</th>
          <th>Buckets (read-only)</th>
          <th>Expires</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${list.map(
          (p) =>
            html`<tr data-preview="${p.name}">
              <td><a href="${appPath(p.appName)}">${p.appName}</a></td>
              <td class="state state-${p.state}">
                ${p.state}${p.stateReason ? html`<br /><span class="muted">${p.stateReason}</span>` : ''}
              </td>
              <td><a href="${p.defaultAddress}">${p.defaultAddress}</a></td>
              <td>${p.release === undefined ? '—' : `v${p.release}`}</td>
              <td>
                ${p.databases.map((d) => html`<code>${d.branch}</code> (of ${d.source})<br />`)}
              </td>
              <td>${p.buckets.join(', ') || '—'}</td>
              <td>${when(p.expiresAt)}</td>
              <td>
                <form
                  method="post"
                  action="${previewsPath(app)}/${enc(p.name)}/delete"
                  class="delete-preview"
                >
                  ${csrfField(c.session.csrf)}
                  <button type="submit" data-confirm="Delete the preview ${p.appName}?">
                    Delete
                  </button>
                </form>
              </td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

/** The list, polled while a preview is being made. */
async function livePreviews(c: PageContext, app: string): Promise<Html> {
  const list = await c.api.call<Preview[]>('GET', `/v1/apps/${enc(app)}/previews`);
  const polling = list.some((p) => p.state === 'creating');
  return html`<div
    id="previews"
    ${polling ? html`hx-get="${previewsPath(app)}/list" hx-trigger="every 2s" hx-swap="outerHTML"` : ''}
  >
    ${previewsTable(c, app, list)}
  </div>`;
}

export const previewsFamily: PageFamily = {
  nav: [],
  register(router) {
    router.page('/console/apps/:name/previews', async (c) => {
      const name = c.params.name!;
      // Read first: another organization's app is a 404 page, like a missing one.
      await c.api.call('GET', `/v1/apps/${enc(name)}`);
      return {
        title: `Previews of ${name}`,
        nav: 'apps',
        body: html`<p>App <a href="${appPath(name)}">${name}</a></p>
          <p class="muted">
            A preview is <code>${name}--&lt;preview&gt;</code>: its own address, the app’s live
            release, secrets and protection, a branch of each attached database in place of the
            original, the app’s buckets read-only. It is removed when it expires.
          </p>
          ${await livePreviews(c, name)}
          <h2>Make a preview</h2>
          <form method="post" action="${previewsPath(name)}" class="stack create-preview">
            ${csrfField(c.session.csrf)}
            <label>Name <input name="name" required maxlength="60" /></label>
            <label
              >Lifetime in days
              <input name="days" type="number" min="1" max="30" value="7" />
            </label>
            <button type="submit">Make preview</button>
          </form>`,
        commands: [
          {
            pier: `pier previews --app ${name}`,
            method: 'GET',
            path: `/v1/apps/${enc(name)}/previews`,
          },
          {
            pier: `pier previews create NAME --app ${name}`,
            method: 'POST',
            path: `/v1/apps/${enc(name)}/previews`,
          },
        ],
      };
    });

    router.page('/console/apps/:name/previews/list', async (c) =>
      fragment(await livePreviews(c, c.params.name!)),
    );

    router.action('/console/apps/:name/previews', async (c) => {
      const name = c.params.name!;
      const days = c.form.days?.trim();
      // A lifetime that is not a number goes to the route as is: its 400 names the field.
      const ttl = days ? (/^\d+$/.test(days) ? Number(days) * 86400 : days) : undefined;
      await c.api.call('POST', `/v1/apps/${enc(name)}/previews`, {
        body: { name: c.form.name ?? '', ...(ttl !== undefined ? { ttlSeconds: ttl } : {}) },
      });
      return redirect(previewsPath(name));
    });

    router.action('/console/apps/:name/previews/:preview/delete', async (c) => {
      const name = c.params.name!;
      await c.api.call('DELETE', `/v1/apps/${enc(name)}/previews/${enc(c.params.preview!)}`);
      return redirect(previewsPath(name));
    });
  },
};
