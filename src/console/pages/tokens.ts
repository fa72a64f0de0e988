/**
 * API keys (spec 2.1, 4.1): the list (name, scopes, agent class and apps, expiry, last
 * use), create with scopes, expiry and an agent block, and revoke. The new key's value is
 * in the create answer only: the form posts through htmx and the answer is swapped into
 * the page, so the address stays `/console/tokens` and a reload lists keys without it.
 */
import type { CreatedKey, KeyRecord } from '../../contracts/tokens.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { fragment, redirect, type PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { enc, listField, momentField, ticked, wholeNumber } from './form-values.js';
import { momentPicker, shownOnce, when, wide } from './widgets.js';

function agentCell(k: KeyRecord): Html {
  if (!k.agent) return html`<span class="muted">—</span>`;
  const apps = k.agent.apps ? k.agent.apps.join(' ') : 'all apps';
  const data = k.agent.prodDataRead ? ', prod data' : '';
  return html`${k.agent.class} <span class="muted">(${apps}${data})</span>`;
}

function tokensTable(c: PageContext, keys: KeyRecord[]): Html {
  if (keys.length === 0) return html`<p class="muted">No keys.</p>`;
  return wide(
    html`<table class="tokens">
      <thead>
        <tr>
          <th>Name and prefix</th>
          <th>Scopes</th>
          <th>Agent class (apps)</th>
          <th>Expires</th>
          <th>Last used</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${keys.map(
          (k) =>
            html`<tr data-token="${k.id}">
              <td>
                ${k.name}${k.id === c.session.keyId ? html` <span class="muted">(this session)</span>` : ''}
                <br /><code class="muted">${k.prefix}</code>
              </td>
              <td>
                ${k.scopes ? k.scopes.join(' ') : html`<span class="muted">full access</span>`}
              </td>
              <td>${agentCell(k)}</td>
              <td>
                ${when(k.expiresAt)}${k.expired ? html` <span class="bad">expired</span>` : ''}
              </td>
              <td>${when(k.lastUsedAt)}</td>
              <td>
                <a href="/console/audit?token=${enc(k.id)}">audit</a>
                <form method="post" action="/console/tokens/${enc(k.id)}/revoke" class="inline">
                  ${csrfField(c.session.csrf)}
                  <button type="submit" class="danger" data-confirm="Revoke key ${k.name}?">
                    Revoke
                  </button>
                </form>
              </td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

/** The list, and above it the answer of a create (the new key's value) when there is one. */
function tokensArea(c: PageContext, keys: KeyRecord[], created?: CreatedKey): Html {
  return html`<div id="tokens-area">
    ${created ? shownOnce(`New key ${created.name}`, created.token) : ''} ${tokensTable(c, keys)}
  </div>`;
}

/**
 * The route refuses a key that would outlast the key creating it (spec 5.6), and here
 * that is the session's short-lived console key: the form says so up front.
 */
function expiryNote(session: KeyRecord | undefined): Html {
  if (!session?.expiresAt) return html``;
  return html`<p class="muted session-expiry">
    A key made here must expire by ${when(session.expiresAt)}, when this session's key does: no key
    may outlast the key that creates it. Give a lifetime or a moment.
  </p>`;
}

const createForm = (c: PageContext) =>
  html`<form
    method="post"
    action="/console/tokens"
    class="stack create-token"
    hx-post="/console/tokens"
    hx-target="#tokens-area"
    hx-swap="outerHTML"
  >
    ${csrfField(c.session.csrf)}
    <label>Name <input name="name" required maxlength="120" /></label>
    <fieldset>
      <legend>Scopes (none ticked and none typed: full access)</legend>
      <label class="check"><input type="checkbox" name="scopeRead" /> read</label>
      <label class="check"><input type="checkbox" name="scopeDeploy" /> deploy</label>
      <label
        >More scopes (<code>deploy:&lt;app&gt;</code>, <code>mail:send</code>,
        <code>mail:send:&lt;domain&gt;</code>) <input name="scopes"
      /></label>
    </fieldset>
    <label>Lifetime in seconds (optional) <input name="ttlSeconds" inputmode="numeric" /></label>
    ${momentPicker('expiresAt', 'Or expires at')}
    <fieldset>
      <legend>Agent token (optional)</legend>
      <label
        >Class
        <select name="agentClass">
          <option value="">not an agent token</option>
          <option value="sandbox">sandbox</option>
          <option value="twin">twin</option>
          <option value="production">production (read only)</option>
        </select></label
      >
      <label>Apps it may touch (empty: the whole organization) <input name="agentApps" /></label>
      <label class="check"
        ><input type="checkbox" name="prodDataRead" /> may read production data (class production
        only)</label
      >
    </fieldset>
    <button type="submit" class="primary">Create key</button>
  </form>`;

/** The create body from the form, as the spec's CreateToken body names its fields. */
export function createTokenBody(form: Record<string, string>): Record<string, unknown> {
  const scopes = [
    ...(ticked(form.scopeRead) ? ['read'] : []),
    ...(ticked(form.scopeDeploy) ? ['deploy'] : []),
    ...listField(form.scopes),
  ];
  const body: Record<string, unknown> = { name: form.name ?? '' };
  if (scopes.length > 0) body.scopes = scopes;
  const ttl = wholeNumber(form.ttlSeconds);
  if (ttl !== undefined) body.ttlSeconds = ttl;
  const expiresAt = momentField(form.expiresAt, form.tzOffset);
  if (expiresAt !== undefined) body.expiresAt = expiresAt;
  if (form.agentClass) {
    const agent: Record<string, unknown> = { class: form.agentClass };
    const apps = listField(form.agentApps);
    if (apps.length > 0) agent.apps = apps;
    if (ticked(form.prodDataRead)) agent.prodDataRead = true;
    body.agent = agent;
  }
  return body;
}

const COMMANDS = [
  { pier: 'pier tokens list', method: 'GET', path: '/v1/tokens' },
  {
    pier: 'pier tokens create --name <name> --scope read --ttl 2592000',
    method: 'POST',
    path: '/v1/tokens',
    body: { name: '<name>', scopes: ['read'], ttlSeconds: 2592000 },
  },
  { pier: 'pier tokens revoke <id>', method: 'DELETE', path: '/v1/tokens/<id>' },
];

export const tokensFamily: PageFamily = {
  nav: [{ key: 'tokens', label: 'Tokens', href: '/console/tokens' }],
  register(router) {
    router.page('/console/tokens', async (c) => {
      const keys = await c.api.call<KeyRecord[]>('GET', '/v1/tokens');
      return {
        title: 'Tokens',
        nav: 'tokens',
        styles: [c.assets.url('data.css')],
        body: html`${tokensArea(c, keys)}
          <h2>Create a key</h2>
          ${expiryNote(keys.find((k) => k.id === c.session.keyId))} ${createForm(c)}`,
        commands: COMMANDS,
        scripts: [c.assets.url('data.js')],
      };
    });

    // The answer carries the key's value: htmx swaps it into the page (no address of its
    // own to reload); without script it is a page of its own, answered to this POST only.
    router.action('/console/tokens', async (c) => {
      const created = await c.api.call<CreatedKey>('POST', '/v1/tokens', {
        body: createTokenBody(c.form),
      });
      const keys = await c.api.call<KeyRecord[]>('GET', '/v1/tokens');
      const area = tokensArea(c, keys, created);
      if (c.htmx) return fragment(area);
      return {
        title: 'Key created',
        nav: 'tokens',
        styles: [c.assets.url('data.css')],
        body: html`${area}
          <p><a href="/console/tokens">Back to the keys</a></p>`,
        commands: COMMANDS,
      };
    });

    router.action('/console/tokens/:id/revoke', async (c) => {
      await c.api.call('DELETE', `/v1/tokens/${enc(c.params.id!)}`);
      return redirect('/console/tokens');
    });
  },
};
