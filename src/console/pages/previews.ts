/**
 * An app's Git push and previews page (issue #26): where to push, the app's Git settings
 * (the production branch, whether other branches deploy previews) with a form to change
 * them; its preview environments with their state, address, release, database branches
 * and expiry; a form to make one; a delete button on each. The list refreshes itself
 * (htmx, every 2 s) while a preview is being made. Every read and action is the `/v1`
 * route's.
 */
import type { AppGit } from '../../contracts/git.js';
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

/** Where to push, the settings, and their form (a preview's makes no previews). */
function gitSection(c: PageContext, app: string, g: AppGit): Html {
  const production = g.productionBranches.join(' or ');
  const previews = g.branchPreviews ? 'on' : 'off';
  return html`<h2>Git push</h2>
    <dl class="facts git">
      <dt>Push over HTTPS</dt>
      <dd><code>${g.pushUrls.https}</code> (an API key as the password)</dd>
      <dt>Push over SSH</dt>
      <dd><code>${g.pushUrls.ssh}</code> (a key added with <code>pier ssh-keys add</code>)</dd>
      <dt>Production branch</dt>
      <dd data-production="${production}">
        ${production}${g.productionBranch === null ? ' (the default)' : ''}: its push deploys ${app}
      </dd>
      <dt>Branch previews</dt>
      <dd data-previews="${previews}">
        ${
          g.previewOf !== undefined
            ? html`off: ${app} is a preview of <a href="${appPath(g.previewOf)}">${g.previewOf}</a>`
            : g.branchPreviews
              ? html`on: a push of another branch deploys its preview
                  <code>${app}--&lt;branch&gt;</code>`
              : 'off: a push of another branch is stored and deploys nothing'
        }
      </dd>
    </dl>
    <form method="post" action="${appPath(app)}/git" class="stack git-settings">
      ${csrfField(c.session.csrf)}
      <label
        >Production branch (empty: main or master)
        <input name="productionBranch" maxlength="255" value="${g.productionBranch ?? ''}" />
      </label>
      ${
        g.previewOf !== undefined
          ? ''
          : html`<label
              >Branch previews
              <select name="branchPreviews">
                <option value="on" ${g.branchPreviews ? 'selected' : ''}>
                  on: other branches deploy their previews
                </option>
                <option value="off" ${g.branchPreviews ? '' : 'selected'}>
                  off: other branches are only stored
                </option>
              </select></label
            >`
      }
      <button type="submit">Save Git settings</button>
    </form>
    <p class="muted">
      Turning previews off leaves the previews there are until they expire or are deleted.
    </p>`;
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
      const git = await c.api.call<AppGit>('GET', `/v1/apps/${enc(name)}/git`);
      return {
        title: `Git push and previews of ${name}`,
        nav: 'apps',
        body: html`<p>App <a href="${appPath(name)}">${name}</a></p>
          ${gitSection(c, name, git)}
          <h2>Previews</h2>
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
          { pier: `pier apps git ${name}`, method: 'GET', path: `/v1/apps/${enc(name)}/git` },
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

    router.action('/console/apps/:name/git', async (c) => {
      const name = c.params.name!;
      const branch = c.form.productionBranch?.trim() ?? '';
      const previews = c.form.branchPreviews;
      // A value that is neither on nor off goes to the route as is: its 400 names the field.
      const on = previews === 'on' ? true : previews === 'off' ? false : previews;
      await c.api.call('PUT', `/v1/apps/${enc(name)}/git`, {
        body: {
          productionBranch: branch || null,
          ...(on !== undefined ? { branchPreviews: on } : {}),
        },
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
