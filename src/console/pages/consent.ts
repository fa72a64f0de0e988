/**
 * OAuth consent (spec 4.2, CONTRACT 4): `GET /v1/oauth/authorize` sends the person to
 * `/console/oauth/consent?requestId=…`. The page shows the client (verified by its
 * metadata document, or registered by anyone) and where it will be sent back, and lets
 * the person choose what the client may do: the agent class (`production`, read-only,
 * preselected), the apps, `prodDataRead` and how long. The decision goes through
 * `POST /v1/oauth/consent/decide`; the browser then goes back to the client. That last
 * step is a `Refresh` to the client's redirect URL rather than a 303: the console's CSP
 * (`form-action 'self'`) rightly stops a form post from being redirected off-site.
 */
import type { ConsentDecided, ConsentLookup } from '../../contracts/oauth.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import type { PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { ticked, wholeNumber } from './form-values.js';

const CLASS_NOTES: Record<string, string> = {
  production: 'may only read; reading data production holds needs the box below',
  twin: 'may do what you may',
  sandbox: 'may do what you may',
};

function clientFacts(ask: ConsentLookup): Html {
  const c = ask.client;
  return html`<dl class="facts">
    <dt>Client</dt>
    <dd class="client-name">${c.name ?? 'unnamed'}</dd>
    <dt>Client id</dt>
    <dd><code class="client-id">${c.id}</code></dd>
    <dt>Verified</dt>
    <dd class="client-verified">
      ${
        c.verified
          ? html`yes: described by the document at its own https address`
          : html`<span class="bad">no</span>: registered by anyone, the name is its own claim`
      }
    </dd>
    <dt>Sends you back to</dt>
    <dd><code class="redirect-host">${c.redirectHost}</code></dd>
    <dt>Asks for</dt>
    <dd class="scopes">${ask.scopes.join(' ')}</dd>
    <dt>Expires at</dt>
    <dd><time datetime="${ask.expiresAt}">${ask.expiresAt}</time></dd>
  </dl>`;
}

/** How long: only a client that may refresh (offline_access) outlives its first hour. */
function lifetimeField(ask: ConsentLookup): Html {
  const days = ask.choices.expiresInDays;
  if (!ask.scopes.includes('offline_access')) {
    return html`<p class="muted">
      The client did not ask to stay connected: its access ends after an hour.
    </p>`;
  }
  return html`<label
    >For how many days (${days.min}–${days.max})
    <input
      name="expiresInDays"
      type="number"
      min="${days.min}"
      max="${days.max}"
      value="${days.default}"
  /></label>`;
}

function choiceForm(c: PageContext, ask: ConsentLookup): Html {
  const ch = ask.choices;
  return html`<form method="post" action="/console/oauth/consent" class="stack consent">
    ${csrfField(c.session.csrf)}
    <input type="hidden" name="requestId" value="${ask.requestId}" />
    <fieldset>
      <legend>Agent class of its tokens</legend>
      ${ch.agentClasses.map(
        (k) =>
          html`<label class="check"
            ><input
              type="radio"
              name="agentClass"
              value="${k}"
              ${k === ch.agentClass ? html`checked` : ''}
            />
            ${k} <span class="muted">(${CLASS_NOTES[k] ?? ''})</span></label
          >`,
      )}
    </fieldset>
    <label class="check"
      ><input type="checkbox" name="prodDataRead" /> production may read the data it holds (files,
      shell, query results)</label
    >
    <fieldset>
      <legend>Apps it may touch (none ticked: the whole organization)</legend>
      ${
        ch.apps.length === 0
          ? html`<p class="muted">The organization has no apps yet.</p>`
          : ch.apps.map(
              (a) =>
                html`<label class="check"><input type="checkbox" name="app.${a}" /> ${a}</label>`,
            )
      }
    </fieldset>
    ${lifetimeField(ask)}
    <div class="actions">
      <button type="submit" name="decision" value="approve" class="primary">Approve</button>
      <button type="submit" name="decision" value="deny" class="danger">Deny</button>
    </div>
  </form>`;
}

/** The decide body from the posted form; what the form cannot read goes on for a 400. */
function decideBody(form: Record<string, string>): Record<string, unknown> {
  const approve = form.decision === 'approve';
  const body: Record<string, unknown> = { requestId: form.requestId ?? '', approve };
  if (!approve) return body;
  const apps = Object.keys(form)
    .filter((k) => k.startsWith('app.'))
    .map((k) => k.slice(4));
  body.agentClass = form.agentClass || 'production';
  if (apps.length) body.apps = apps;
  if (ticked(form.prodDataRead)) body.prodDataRead = true;
  const days = wholeNumber(form.expiresInDays);
  if (days !== undefined) body.expiresInDays = days;
  return body;
}

export const consentFamily: PageFamily = {
  nav: [],
  register(router) {
    router.page('/console/oauth/consent', async (c) => {
      const requestId = c.query.requestId?.trim() ?? '';
      const ask = await c.api.call<ConsentLookup>('POST', '/v1/oauth/consent/lookup', {
        body: { requestId },
      });
      return {
        title: 'Connect an MCP client',
        nav: '',
        styles: [c.assets.url('data.css')],
        body: html`<p>
            An MCP client asks to act in <b>${c.session.org.name}</b> as an agent. Approve only if
            you started this from the client, and give it no more than it needs.
          </p>
          ${clientFacts(ask)} ${choiceForm(c, ask)}`,
        commands: [{ method: 'POST', path: '/v1/oauth/consent/lookup', body: { requestId } }],
      };
    });

    router.action('/console/oauth/consent', async (c) => {
      const body = decideBody(c.form);
      const done = await c.api.call<ConsentDecided>('POST', '/v1/oauth/consent/decide', { body });
      c.reply.header('refresh', `0; url=${done.redirectUrl}`);
      const host = new URL(done.redirectUrl).host;
      return {
        title: done.approved ? 'Client connected' : 'Client refused',
        nav: '',
        body: html`<p class="notice">
            ${
              done.approved
                ? 'Approved. The client receives its tokens.'
                : 'Denied. The client is told so and gets nothing.'
            }
          </p>
          <p><a class="continue" href="${done.redirectUrl}">Continue to ${host}</a></p>`,
        commands: [{ method: 'POST', path: '/v1/oauth/consent/decide', body }],
      };
    });
  },
};
