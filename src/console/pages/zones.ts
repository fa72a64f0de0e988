/**
 * The organization's zones (spec 2.10, 4.8, docs/api.md "Zone record"): each with its
 * `dns.acme` and `dns.point` records, status and reason, attempts, last check and the
 * wildcard certificate's expiry; claim, check now, release. A refused claim (503
 * `zones-unavailable` when this installation runs no edge DNS, 409 `conflict`) is shown
 * above the claim form.
 */
import type { Zone } from '../../contracts/zones.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { redirect, type PageContext, type View } from '../router.js';
import { dnsRecords, orInPlace, post, progressFacts } from './domains.js';
import type { PageFamily } from './family.js';
import { enc } from './form-values.js';
import { when } from './widgets.js';

const ZONES = '/console/zones';
const V1 = '/v1/domains/zones';

function zoneSection(c: PageContext, z: Zone): Html {
  const base = `${ZONES}/${enc(z.zone)}`;
  return html`<section class="zone" data-zone="${z.zone}">
    <h2><code>${z.zone}</code></h2>
    <dl class="facts">
      ${progressFacts(z)}
      <dt>Claimed</dt>
      <dd>${when(z.createdAt)}</dd>
    </dl>
    <h3>DNS records to set</h3>
    ${dnsRecords([
      ['acme', z.dns.acme],
      ['point', z.dns.point],
    ])}
    <p class="actions">
      ${post(c, `${base}/check`, html`<button type="submit">Check now</button>`)}
      ${post(
        c,
        `${base}/release`,
        html`<button
          type="submit"
          class="danger"
          data-confirm="Release ${z.zone}? Its wildcard certificate goes too."
        >
          Release
        </button>`,
      )}
    </p>
  </section>`;
}

/** The page; a refusal goes above the list (`top`) or above the claim form. */
async function zonesPage(c: PageContext, refusal: Html | string = '', at = 'claim'): Promise<View> {
  const list = await c.api.call<Zone[]>('GET', V1);
  const checked = c.query.checked;
  return {
    title: 'Zones',
    nav: 'zones',
    styles: [c.assets.url('data.css')],
    body: html`<p>
        A zone you prove once (the <code>acme</code> record hands its certificate's DNS check to
        pier; the <code>point</code> record sends every name below it to the edge) serves
        <code>&lt;app&gt;.&lt;zone&gt;</code> for each of your apps, with one wildcard certificate
        and no record of its own.
      </p>
      ${checked ? html`<p class="notice" role="status">A check of ${checked} is queued.</p>` : ''}
      ${at === 'top' ? refusal : ''}
      ${list.length === 0 ? html`<p class="muted">No zones.</p>` : ''}
      ${list.map((z) => zoneSection(c, z))}
      <h2>Claim a zone</h2>
      ${at === 'claim' ? refusal : ''}
      <form method="post" action="${ZONES}" class="stack claim-zone">
        ${csrfField(c.session.csrf)}
        <label>Zone <input name="zone" required maxlength="253" placeholder="example.com" /></label>
        <button type="submit" class="primary">Claim zone</button>
      </form>`,
    commands: [
      { pier: 'pier zones list', method: 'GET', path: V1 },
      { pier: 'pier zones claim <zone>', method: 'POST', path: V1, body: { zone: '<zone>' } },
      { pier: 'pier zones show <zone>', method: 'GET', path: `${V1}/<zone>` },
      { pier: 'pier zones check <zone>', method: 'POST', path: `${V1}/<zone>/check` },
      { pier: 'pier zones release <zone>', method: 'DELETE', path: `${V1}/<zone>` },
    ],
  };
}

export const zonesFamily: PageFamily = {
  nav: [{ key: 'zones', label: 'Zones', href: ZONES }],
  register(router) {
    router.page(ZONES, async (c) => zonesPage(c));

    router.action(ZONES, async (c) =>
      orInPlace(
        async () => {
          await c.api.call('POST', V1, { body: { zone: c.form.zone ?? '' } });
          return redirect(ZONES);
        },
        (refusal) => zonesPage(c, refusal),
      ),
    );
    router.action(`${ZONES}/:zone/check`, async (c) => {
      const zone = c.params.zone!;
      await c.api.call('POST', `${V1}/${enc(zone)}/check`);
      return redirect(`${ZONES}?checked=${enc(zone)}`);
    });
    // 409 `zone-in-use` names the domains that rely on the zone: shown above the list.
    router.action(`${ZONES}/:zone/release`, async (c) =>
      orInPlace(
        async () => {
          await c.api.call('DELETE', `${V1}/${enc(c.params.zone!)}`);
          return redirect(ZONES);
        },
        (refusal) => zonesPage(c, refusal, 'top'),
      ),
    );
  },
};
