/**
 * Databases (spec 2.5, 4.3): the list, create (the connection URL is in the create answer
 * only), and a database's page with branch, fork and restore (moment pickers, read as
 * the person's local time, form-values.ts), its copies with their expiry, a copy's
 * one-time URL, and delete. Answers that carry a URL are swapped in by htmx (the address
 * stays a GET page, so a reload shows no URL); without script they are the POST's page.
 */
import type {
  CopyUrl,
  CreatedDatabase,
  DatabaseRecord,
  RestoringDatabase,
} from '../../contracts/databases.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { fragment, redirect, type Outcome, type PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { enc, momentField, ticked, wholeNumber } from './form-values.js';
import { momentPicker, shownOnce, when, wide } from './widgets.js';

export const databasePath = (name: string) => `/console/databases/${enc(name)}`;
const v1Path = (name: string) => `/v1/resources/${enc(name)}`;

function copyOf(d: DatabaseRecord): Html {
  if (!d.copyKind) return html``;
  return html`${d.copyKind} of
    <a href="${databasePath(d.sourceName ?? '')}">${d.sourceName}</a>
    ${d.sourceAsOf ? html`as of ${when(d.sourceAsOf)}` : ''}${d.ephemeral ? ' (ephemeral)' : ''}`;
}

function databasesTable(list: DatabaseRecord[], empty = 'No databases.'): Html {
  if (list.length === 0) return html`<p class="muted">${empty}</p>`;
  return wide(
    html`<table class="databases">
      <thead>
        <tr>
          <th>Database</th>
          <th>Kind</th>
          <th>State</th>
          <th>Copy of</th>
          <th>Expires</th>
          <th>Created</th>
        </tr>
      </thead>
      <tbody>
        ${list.map(
          (d) =>
            html`<tr data-database="${d.name}">
              <td><a href="${databasePath(d.name)}">${d.name}</a></td>
              <td>${d.kind}</td>
              <td class="state state-${d.state}" title="${d.stateReason ?? ''}">${d.state}</td>
              <td>${copyOf(d)}</td>
              <td>${when(d.expiresAt)}</td>
              <td>${when(d.createdAt)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

/** The answer of a create or a URL hand-out: its URL once, then what the page lists. */
function withUrl(c: PageContext, target: string, what: string, url: string, rest: Html): Outcome {
  const box = html`<div id="${target}">${shownOnce(what, url)} ${rest}</div>`;
  if (c.htmx) return fragment(box);
  return {
    title: what,
    nav: 'databases',
    styles: [c.assets.url('data.css')],
    body: html`${box}
      <p><a href="/console/databases">Back to the databases</a></p>`,
  };
}

const createForm = (c: PageContext) =>
  html`<form
    method="post"
    action="/console/databases"
    class="stack create-database"
    hx-post="/console/databases"
    hx-target="#databases-area"
    hx-swap="outerHTML"
  >
    ${csrfField(c.session.csrf)}
    <label>Name <input name="name" required /></label>
    <label
      >Kind
      <select name="kind">
        <option value="postgres">postgres</option>
        <option value="redis">redis</option>
      </select></label
    >
    <label>Memory in MB (optional) <input name="memoryMb" inputmode="numeric" /></label>
    <label>Disk in GB (optional) <input name="sizeGb" inputmode="numeric" /></label>
    <button type="submit" class="primary">Create database</button>
  </form>`;

/** `ttlSeconds` or `expiresAt` of a copy, as the branch and fork bodies name them. */
function copyExpiry(form: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const ttl = wholeNumber(form.ttlSeconds);
  if (ttl !== undefined) out.ttlSeconds = ttl;
  const expiresAt = momentField(form.expiresAt, form.tzOffset);
  if (expiresAt !== undefined) out.expiresAt = expiresAt;
  return out;
}

function copyForms(c: PageContext, name: string): Html {
  const expiry = html`<label
      >Lifetime in seconds (optional) <input name="ttlSeconds" inputmode="numeric"
    /></label>
    ${momentPicker('expiresAt', 'Or expires at')}`;
  return html`<h2>Branch (a copy of it as it is now)</h2>
    <form method="post" action="${databasePath(name)}/branch" class="stack branch">
      ${csrfField(c.session.csrf)}
      <label>Branch name <input name="name" required /></label>
      <label class="check"
        ><input type="checkbox" name="ephemeral" /> ephemeral (ready faster, no archive of its
        own)</label
      >
      ${expiry}
      <button type="submit" class="primary">Branch</button>
    </form>
    <h2>Fork (a full copy from the archive, as of a moment)</h2>
    <form method="post" action="${databasePath(name)}/fork" class="stack fork">
      ${csrfField(c.session.csrf)}
      <label>Fork name <input name="name" required /></label>
      ${momentPicker('asOf', 'As of (empty: now)')} ${expiry}
      <button type="submit" class="primary">Fork</button>
    </form>
    <h2>Restore in place</h2>
    <form method="post" action="${databasePath(name)}/restore" class="stack restore">
      ${csrfField(c.session.csrf)} ${momentPicker('asOf', 'Back to', true)}
      <label
        >Keep the state before under (optional branch name) <input name="preserveUnderName"
      /></label>
      <button type="submit" class="danger" data-confirm="Restore ${name} in place?">Restore</button>
    </form>`;
}

function urlButton(c: PageContext, d: DatabaseRecord): Html {
  if (!d.copyKind) return html``;
  return html`<div id="copy-url">
    <form
      method="post"
      action="${databasePath(d.name)}/url"
      hx-post="${databasePath(d.name)}/url"
      hx-target="#copy-url"
      hx-swap="outerHTML"
    >
      ${csrfField(c.session.csrf)}
      <button type="submit" class="primary">Get its connection URL (once only)</button>
    </form>
  </div>`;
}

export const databasesFamily: PageFamily = {
  nav: [{ key: 'databases', label: 'Databases', href: '/console/databases' }],
  register(router) {
    router.page('/console/databases', async (c) => {
      const list = await c.api.call<DatabaseRecord[]>('GET', '/v1/resources');
      return {
        title: 'Databases',
        nav: 'databases',
        styles: [c.assets.url('data.css')],
        body: html`<div id="databases-area">${databasesTable(list)}</div>
          <h2>Create a database</h2>
          ${createForm(c)}`,
        commands: [
          { pier: 'pier db list', method: 'GET', path: '/v1/resources' },
          {
            pier: 'pier db create <name> --kind postgres',
            method: 'POST',
            path: '/v1/resources',
            body: { name: '<name>', kind: 'postgres' },
          },
        ],
      };
    });

    router.action('/console/databases', async (c) => {
      const body: Record<string, unknown> = { name: c.form.name ?? '', kind: c.form.kind ?? '' };
      const memoryMb = wholeNumber(c.form.memoryMb);
      if (memoryMb !== undefined) body.memoryMb = memoryMb;
      const sizeGb = wholeNumber(c.form.sizeGb);
      if (sizeGb !== undefined) body.sizeGb = sizeGb;
      const made = await c.api.call<CreatedDatabase>('POST', '/v1/resources', { body });
      const list = await c.api.call<DatabaseRecord[]>('GET', '/v1/resources');
      return withUrl(c, 'databases-area', `URL of ${made.name}`, made.url, databasesTable(list));
    });

    router.page('/console/databases/:name', async (c) => {
      const name = c.params.name!;
      const d = await c.api.call<DatabaseRecord>('GET', v1Path(name));
      const copies = (await c.api.call<DatabaseRecord[]>('GET', '/v1/resources')).filter(
        (x) => x.sourceName === d.name,
      );
      return {
        title: `Database ${d.name}`,
        nav: 'databases',
        styles: [c.assets.url('data.css')],
        body: html`${databasesTable([d])} ${urlButton(c, d)}
          <dl class="facts">
            <dt>Attached apps get</dt>
            <dd><code>${d.secretKey}</code></dd>
            <dt>Port</dt>
            <dd>${d.port}</dd>
            <dt>Durability</dt>
            <dd>${d.durability}</dd>
            <dt>Power</dt>
            <dd>${d.power}</dd>
          </dl>
          <h2>Copies</h2>
          ${databasesTable(copies, 'No copies.')} ${copyForms(c, d.name)}
          <h2>Delete</h2>
          <form method="post" action="${databasePath(d.name)}/delete">
            ${csrfField(c.session.csrf)}
            <button type="submit" class="danger" data-confirm="Delete ${d.name} and its data?">
              Delete database
            </button>
          </form>`,
        commands: [
          { pier: `pier db show ${d.name}`, method: 'GET', path: v1Path(d.name) },
          {
            pier: `pier db branch ${d.name} <branch>`,
            method: 'POST',
            path: `${v1Path(d.name)}/branch`,
            body: { name: '<branch>' },
          },
          {
            pier: `pier db fork ${d.name} <fork> --as-of <time>`,
            method: 'POST',
            path: `${v1Path(d.name)}/fork`,
            body: { name: '<fork>', asOf: '<time>' },
          },
          {
            pier: `pier db restore ${d.name} --as-of <time>`,
            method: 'POST',
            path: `${v1Path(d.name)}/restore`,
            body: { asOf: '<time>' },
          },
        ],
        scripts: [c.assets.url('data.js')],
      };
    });

    router.action('/console/databases/:name/branch', async (c) => {
      const body = { name: c.form.name ?? '', ...copyExpiry(c.form) };
      if (ticked(c.form.ephemeral)) Object.assign(body, { ephemeral: true });
      const made = await c.api.call<DatabaseRecord>('POST', `${v1Path(c.params.name!)}/branch`, {
        body,
      });
      return redirect(databasePath(made.name));
    });

    router.action('/console/databases/:name/fork', async (c) => {
      const body: Record<string, unknown> = { name: c.form.name ?? '', ...copyExpiry(c.form) };
      const asOf = momentField(c.form.asOf, c.form.tzOffset);
      if (asOf !== undefined) body.asOf = asOf;
      const made = await c.api.call<DatabaseRecord>('POST', `${v1Path(c.params.name!)}/fork`, {
        body,
      });
      return redirect(databasePath(made.name));
    });

    router.action('/console/databases/:name/restore', async (c) => {
      // An empty picker goes as an empty string: the route's 400 names `asOf`.
      const body: Record<string, unknown> = {
        asOf: momentField(c.form.asOf, c.form.tzOffset) ?? '',
      };
      if (c.form.preserveUnderName?.trim())
        body.preserveUnderName = c.form.preserveUnderName.trim();
      const d = await c.api.call<RestoringDatabase>('POST', `${v1Path(c.params.name!)}/restore`, {
        body,
      });
      return redirect(databasePath(d.name));
    });

    router.action('/console/databases/:name/url', async (c) => {
      const got = await c.api.call<CopyUrl>('POST', `${v1Path(c.params.name!)}/url`);
      return withUrl(c, 'copy-url', `URL of ${got.name}`, got.url, html``);
    });

    router.action('/console/databases/:name/delete', async (c) => {
      await c.api.call('DELETE', v1Path(c.params.name!));
      return redirect('/console/databases');
    });
  },
};
