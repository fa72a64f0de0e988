/**
 * Webhooks (spec 4.11, docs/webhooks.md): the list, create (the signing secret in the
 * answer only, swapped into the page by htmx as tokens.ts does with a key's value),
 * delete, and each webhook's newest deliveries with every attempt.
 */
import {
  WEBHOOK_EVENT_KINDS,
  type CreatedWebhook,
  type Delivery,
  type Webhook,
} from '../../contracts/webhooks.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { fragment, redirect, type PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { enc, ticked } from './form-values.js';
import { shownOnce, when, wide } from './widgets.js';

function webhooksTable(c: PageContext, hooks: Webhook[]): Html {
  if (hooks.length === 0) return html`<p class="muted">No webhooks.</p>`;
  return wide(
    html`<table class="webhooks">
      <thead>
        <tr>
          <th>URL</th>
          <th>Events</th>
          <th>State</th>
          <th>Created</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${hooks.map(
          (h) =>
            html`<tr data-webhook="${h.id}">
              <td><code>${h.url}</code><br /><code class="muted">${h.id}</code></td>
              <td>${h.events.join(' ')}</td>
              <td>
                ${h.enabled ? 'enabled' : html`<span class="bad">disabled</span> ${h.disabledReason}`}
              </td>
              <td>${when(h.createdAt)}</td>
              <td>
                <a href="/console/webhooks/${enc(h.id)}">deliveries</a>
                <form method="post" action="/console/webhooks/${enc(h.id)}/delete" class="inline">
                  ${csrfField(c.session.csrf)}
                  <button type="submit" class="danger" data-confirm="Delete webhook ${h.url}?">
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

function webhooksArea(c: PageContext, hooks: Webhook[], created?: CreatedWebhook): Html {
  return html`<div id="webhooks-area">
    ${created ? shownOnce(`Signing secret of ${created.url}`, created.secret) : ''}
    ${webhooksTable(c, hooks)}
  </div>`;
}

const createForm = (c: PageContext) =>
  html`<form
    method="post"
    action="/console/webhooks"
    class="stack create-webhook"
    hx-post="/console/webhooks"
    hx-target="#webhooks-area"
    hx-swap="outerHTML"
  >
    ${csrfField(c.session.csrf)}
    <label>URL <input name="url" required maxlength="2048" placeholder="https://" /></label>
    <fieldset>
      <legend>Events</legend>
      ${WEBHOOK_EVENT_KINDS.map(
        (k) => html`<label class="check"><input type="checkbox" name="${k}" /> ${k}</label>`,
      )}
    </fieldset>
    <button type="submit" class="primary">Create webhook</button>
  </form>`;

/** The create body from the form: the URL and every ticked kind. */
export function createWebhookForm(form: Record<string, string>): Record<string, unknown> {
  return { url: form.url ?? '', events: WEBHOOK_EVENT_KINDS.filter((k) => ticked(form[k])) };
}

function deliveriesTable(list: Delivery[]): Html {
  if (list.length === 0) return html`<p class="muted">No deliveries yet.</p>`;
  return wide(
    html`<table class="deliveries">
      <thead>
        <tr>
          <th>Event</th>
          <th>Status</th>
          <th>Attempts (status, time, error)</th>
          <th>Next attempt</th>
        </tr>
      </thead>
      <tbody>
        ${list.map(
          (d) =>
            html`<tr>
              <td>${d.type}<br /><code class="muted">${d.eventId}</code> ${when(d.createdAt)}</td>
              <td>
                ${d.status === 'succeeded' ? d.status : html`<span class="bad">${d.status}</span>`}
              </td>
              <td>
                ${d.attempts.map(
                  (a) =>
                    html`<div>
                      #${a.attempt} ${a.responseStatus ?? '—'} ${a.durationMs} ms ${when(a.at)}
                      ${a.error ? html`<span class="muted">${a.error}</span>` : ''}
                    </div>`,
                )}
              </td>
              <td>${when(d.nextAttemptAt)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

const COMMANDS = [
  { method: 'GET', path: '/v1/webhooks' },
  {
    method: 'POST',
    path: '/v1/webhooks',
    body: { url: 'https://example.com/hooks', events: ['email.delivered'] },
  },
  { method: 'DELETE', path: '/v1/webhooks/<id>' },
];

export const webhooksFamily: PageFamily = {
  nav: [{ key: 'webhooks', label: 'Webhooks', href: '/console/webhooks' }],
  register(router) {
    router.page('/console/webhooks', async (c) => {
      const hooks = await c.api.call<Webhook[]>('GET', '/v1/webhooks');
      return {
        title: 'Webhooks',
        nav: 'webhooks',
        styles: [c.assets.url('data.css')],
        body: html`${webhooksArea(c, hooks)}
          <h2>Create a webhook</h2>
          <p class="muted">
            Deliveries are signed as Standard Webhooks; see the documentation for the payload and
            how to verify it.
          </p>
          ${createForm(c)}`,
        commands: COMMANDS,
        scripts: [c.assets.url('data.js')],
      };
    });

    router.page('/console/webhooks/:id', async (c) => {
      const id = enc(c.params.id!);
      const hook = await c.api.call<Webhook>('GET', `/v1/webhooks/${id}`);
      const list = await c.api.call<Delivery[]>('GET', `/v1/webhooks/${id}/deliveries`, {
        query: { limit: '50' },
      });
      return {
        title: `Webhook ${hook.url}`,
        nav: 'webhooks',
        styles: [c.assets.url('data.css')],
        body: html`<p><a href="/console/webhooks">All webhooks</a></p>
          <p>
            <code>${hook.url}</code> — ${hook.events.join(' ')} —
            ${hook.enabled ? 'enabled' : html`<span class="bad">disabled</span>`}
          </p>
          <h2>Newest deliveries</h2>
          ${deliveriesTable(list)}`,
        commands: [{ method: 'GET', path: `/v1/webhooks/${id}/deliveries` }],
      };
    });

    // The answer carries the secret: swapped into the page by htmx, never at an address.
    router.action('/console/webhooks', async (c) => {
      const created = await c.api.call<CreatedWebhook>('POST', '/v1/webhooks', {
        body: createWebhookForm(c.form),
      });
      const hooks = await c.api.call<Webhook[]>('GET', '/v1/webhooks');
      const area = webhooksArea(c, hooks, created);
      if (c.htmx) return fragment(area);
      return {
        title: 'Webhook created',
        nav: 'webhooks',
        styles: [c.assets.url('data.css')],
        body: html`${area}
          <p><a href="/console/webhooks">Back to the webhooks</a></p>`,
        commands: COMMANDS,
      };
    });

    router.action('/console/webhooks/:id/delete', async (c) => {
      await c.api.call('DELETE', `/v1/webhooks/${enc(c.params.id!)}`);
      return redirect('/console/webhooks');
    });
  },
};
