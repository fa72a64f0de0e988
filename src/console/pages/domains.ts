/**
 * An app's custom domains (spec 4.8, docs/api.md "Custom domains and zones"): each with
 * its status and the reason of its last failed check, the DNS records to set, the
 * certificate's expiry and its redirect; add, check now, redirect, delete. A refused add
 * is shown above the form it came from, so the name typed is not lost with the page.
 */
import type { App } from '../../contracts/apps.js';
import type { DnsRecord, Domain } from '../../contracts/domains.js';
import type { Zone } from '../../contracts/zones.js';
import { Refusal } from '../api.js';
import { html, type Html } from '../html.js';
import { csrfField, errorBox } from '../layout.js';
import { redirect, type Outcome, type PageContext, type View } from '../router.js';
import type { PageFamily } from './family.js';
import { enc } from './form-values.js';
import { when, wide } from './widgets.js';

export const domainsPath = (app: string) => `/console/apps/${enc(app)}/domains`;
const v1 = (app: string) => `/v1/apps/${enc(app)}/domains`;

/** The DNS records to set, one row each, `label` naming what the record is for. */
export function dnsRecords(records: [label: string, record: DnsRecord | undefined][]): Html {
  return wide(
    html`<table class="dns-records">
      <thead>
        <tr>
          <th>Record</th>
          <th>Type</th>
          <th>Name</th>
          <th>Value</th>
        </tr>
      </thead>
      <tbody>
        ${records.map(([label, r]) =>
          r
            ? html`<tr data-record="${label}">
                <td>${label}</td>
                <td><code>${r.type}</code></td>
                <td><code>${r.name}</code></td>
                <td><code>${r.value}</code></td>
              </tr>`
            : '',
        )}
      </tbody>
    </table>`,
  );
}

/** A domain's or zone's status, with the reason of its last failed check under it. */
function progress(p: Pick<Domain, 'status' | 'error'>): Html {
  // The machines' state colours: green once served with a certificate, red on failure.
  const cls = { cert_issued: 'state-running', error: 'state-failed' }[p.status as string] ?? '';
  return html`<span class="state ${cls}" data-status="${p.status}">${p.status}</span>
    ${p.error ? html`<div class="muted" data-error>${p.error}</div>` : ''}`;
}

/**
 * Runs a form's change; a refusal (other than a lapsed session) is answered by `page`
 * with the refusal shown above it, at the refusal's status.
 */
export async function orInPlace(
  change: () => Promise<Outcome>,
  page: (refusal: Html) => Promise<View>,
): Promise<Outcome> {
  try {
    return await change();
  } catch (err) {
    if (!(err instanceof Refusal) || err.status === 401) throw err;
    return { ...(await page(errorBox(err))), status: err.status };
  }
}

/** A one-button (or one-field) form inline in a table cell. */
export const post = (c: PageContext, action: string, inner: Html) =>
  html`<form method="post" action="${action}" class="inline">
    ${csrfField(c.session.csrf)}${inner}
  </form>`;

/** The redirect picker: none, the default address, or another domain of the app. */
function redirectForm(c: PageContext, app: App, d: Domain, all: Domain[]): Html {
  const targets = [app.defaultAddress, ...all.map((o) => o.domain).filter((n) => n !== d.domain)];
  return post(
    c,
    `${domainsPath(app.name)}/${enc(d.domain)}/redirect`,
    html`<select name="to" aria-label="Redirect ${d.domain} to">
        <option value="">no redirect</option>
        ${targets.map(
          (t) =>
            html`<option value="${t}" ${t === d.redirectTo ? 'selected' : ''}>308 to ${t}</option>`,
        )}
      </select>
      <button type="submit">Set</button>`,
  );
}

/** Status, reason, checks and certificate: the facts domains and zones share (spec 2.10). */
export function progressFacts(p: Domain | Zone): Html {
  return html`<dt>Status</dt>
    <dd>${progress(p)}</dd>
    <dt>Checks</dt>
    <dd><span data-attempts>${String(p.attempts)}</span>, last ${when(p.lastCheckedAt)}</dd>
    <dt>Certificate expires</dt>
    <dd data-cert>${when(p.certNotAfter)}</dd>`;
}

function domainSection(c: PageContext, app: App, d: Domain, all: Domain[]): Html {
  const base = `${domainsPath(app.name)}/${enc(d.domain)}`;
  return html`<section class="domain" data-domain="${d.domain}">
    <h2><code>${d.domain}</code></h2>
    <dl class="facts">
      ${progressFacts(d)}
      ${
        d.zone
          ? html`<dt>Zone</dt>
              <dd>${d.zone} (no proof record needed)</dd>`
          : ''
      }
      <dt>Redirect</dt>
      <dd>${redirectForm(c, app, d, all)}</dd>
    </dl>
    <h3>DNS records to set</h3>
    ${dnsRecords([
      ['proof', d.dns.proof],
      ['point', d.dns.point],
    ])}
    <p class="actions">
      ${post(c, `${base}/check`, html`<button type="submit">Check now</button>`)}
      ${post(
        c,
        `${base}/delete`,
        html`<button
          type="submit"
          class="danger"
          data-confirm="Remove ${d.domain}? Its certificate goes too."
        >
          Delete
        </button>`,
      )}
    </p>
  </section>`;
}

async function domainsPage(c: PageContext, name: string, above: Html | string = ''): Promise<View> {
  const [app, list] = await Promise.all([
    c.api.call<App>('GET', `/v1/apps/${enc(name)}`),
    c.api.call<Domain[]>('GET', v1(name)),
  ]);
  const checked = c.query.checked;
  return {
    title: `App ${name}: custom domains`,
    nav: 'apps',
    styles: [c.assets.url('data.css')],
    body: html`<p>
        <a href="/console/apps/${enc(name)}">Back to ${name}</a> ·
        <a href="/console/apps/${enc(name)}/edge">Protection, network policy and UDP endpoints</a>
        · <a href="/console/zones">Zones</a>
      </p>
      <p>Default address: <code>${app.defaultAddress}</code></p>
      ${checked ? html`<p class="notice" role="status">A check of ${checked} is queued.</p>` : ''}
      ${list.length === 0 ? html`<p class="muted">No custom domains.</p>` : ''}
      ${list.map((d) => domainSection(c, app, d, list))}
      <h2>Add a domain</h2>
      ${above}
      <form method="post" action="${domainsPath(name)}" class="stack add-domain">
        ${csrfField(c.session.csrf)}
        <label
          >Domain (no wildcards: claim the zone instead)
          <input name="domain" required maxlength="253" placeholder="www.example.com"
        /></label>
        <button type="submit" class="primary">Add domain</button>
      </form>
      <p class="muted">
        Set the records the list shows, then check: pier proves the name by the TXT record, sees it
        point at the edge, and gets its certificate. Checks also retry on their own.
      </p>`,
    commands: [
      { pier: `pier domains list ${name}`, method: 'GET', path: v1(name) },
      {
        pier: `pier domains add ${name} <domain>`,
        method: 'POST',
        path: v1(name),
        body: { domain: '<domain>' },
      },
      {
        pier: `pier domains check ${name} <domain>`,
        method: 'POST',
        path: `${v1(name)}/<domain>/check`,
      },
      {
        pier: `pier domains redirect ${name} <domain> <to>`,
        method: 'PUT',
        path: `${v1(name)}/<domain>/redirect`,
        body: { to: '<to>' },
      },
      {
        pier: `pier domains remove ${name} <domain>`,
        method: 'DELETE',
        path: `${v1(name)}/<domain>`,
      },
    ],
  };
}

export const domainsFamily: PageFamily = {
  nav: [],
  register(router) {
    router.page('/console/apps/:name/domains', async (c) => domainsPage(c, c.params.name!));

    router.action('/console/apps/:name/domains', async (c) => {
      const app = c.params.name!;
      return orInPlace(
        async () => {
          await c.api.call('POST', v1(app), { body: { domain: c.form.domain ?? '' } });
          return redirect(domainsPath(app));
        },
        (refusal) => domainsPage(c, app, refusal),
      );
    });
    router.action('/console/apps/:name/domains/:domain/check', async (c) => {
      const [app, domain] = [c.params.name!, c.params.domain!];
      await c.api.call('POST', `${v1(app)}/${enc(domain)}/check`);
      return redirect(`${domainsPath(app)}?checked=${enc(domain)}`);
    });
    router.action('/console/apps/:name/domains/:domain/redirect', async (c) => {
      const [app, domain] = [c.params.name!, c.params.domain!];
      const to = c.form.to?.trim() ? c.form.to.trim() : null;
      await c.api.call('PUT', `${v1(app)}/${enc(domain)}/redirect`, { body: { to } });
      return redirect(domainsPath(app));
    });
    router.action('/console/apps/:name/domains/:domain/delete', async (c) => {
      const [app, domain] = [c.params.name!, c.params.domain!];
      await c.api.call('DELETE', `${v1(app)}/${enc(domain)}`);
      return redirect(domainsPath(app));
    });
  },
};
