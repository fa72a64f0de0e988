/**
 * The billing page's changes (spec 4.7, 5.7): top-up, auto-recharge and the payment
 * provider's portal, for admins. Members see why they have none. A top-up or portal
 * visit leaves the console for the provider's page through a link on an interstitial
 * page, not a redirect of the form post: the console's CSP (`form-action 'self'`) would
 * stop a form's redirect to another origin. The provider sends the payer back to
 * `/console/billing?topup=<id>`, which shows where that top-up stands.
 */
import type { CreditAccount, Topup, TopupAnswer } from '../../contracts/billing.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { redirect, type PageContext } from '../router.js';
import type { ConsoleRouter } from '../router.js';
import { enc, ticked } from './form-values.js';

export const euros = (cents: number) => `€${(cents / 100).toFixed(2)}`;

/** Euros as typed (`12`, `12.5`, `12.50`) in cents, or the text for the route to refuse. */
function cents(value: string | undefined): number | string | undefined {
  const v = value?.trim().replace(',', '.');
  if (!v) return undefined;
  return /^\d+(\.\d{1,2})?$/.test(v) ? Math.round(Number(v) * 100) : v;
}

const field = (name: string, label: string, value?: number) =>
  html`<label
    >${label} (€)
    <input
      name="${name}"
      inputmode="decimal"
      value="${value === undefined ? '' : (value / 100).toFixed(2)}"
  /></label>`;

function topupForm(c: PageContext, a: CreditAccount): Html {
  return html`<form method="post" action="/console/billing/topup" class="stack topup">
    ${csrfField(c.session.csrf)} ${field('amount', `Top up (at least ${euros(a.minTopupCents)})`)}
    <button type="submit" class="primary">Top up</button>
  </form>`;
}

function rechargeForm(c: PageContext, a: CreditAccount): Html {
  const r = a.autoRecharge;
  return html`<form
    method="post"
    action="/console/billing/auto-recharge"
    class="stack auto-recharge"
  >
    ${csrfField(c.session.csrf)}
    <label class="check"
      ><input type="checkbox" name="enabled" ${r.enabled ? 'checked' : ''} /> recharge
      automatically</label
    >
    ${field('threshold', 'When the balance falls below', r.thresholdCents)}
    ${field('amountEach', 'charge', r.amountCents)}
    ${field('cap', 'never more than, in total,', r.capCents)}
    ${r.hasPaymentMethod ? '' : html`<p class="muted">The first top-up saves the card it is paid with.</p>`}
    <button type="submit">Save auto-recharge</button>
  </form>`;
}

/** Where a top-up the payer came back from stands. */
export async function topupReturn(c: PageContext): Promise<Html> {
  const id = c.query.topup;
  if (!id) return html``;
  if (c.query.cancelled) return html`<p class="topup-state refusal">The top-up was cancelled.</p>`;
  const t = await c.api.call<Topup>('GET', `/v1/billing/topups/${enc(id)}`);
  const state =
    t.state === 'paid'
      ? 'paid and credited'
      : t.state === 'failed'
        ? 'failed'
        : 'waiting for the payment provider to confirm it (reload in a moment)';
  return html`<p class="topup-state" data-state="${t.state}">
    Top-up of ${euros(t.amountCents)}: ${state}.
  </p>`;
}

/** The `#billing-actions` section: forms for admins, the reason for everyone else. */
export function billingActions(c: PageContext, a: CreditAccount | undefined): Html {
  if (!a) return html``;
  if (c.session.role !== 'admin') {
    return html`<p class="muted why-not">
      Only admins of the organization top up, set auto-recharge or open the payment portal (your
      role: ${c.session.role ?? 'none'}).
    </p>`;
  }
  return html`${topupForm(c, a)} ${rechargeForm(c, a)}
    <form method="post" action="/console/billing/portal" class="inline portal">
      ${csrfField(c.session.csrf)}<button type="submit">Payment methods and receipts</button>
    </form>`;
}

/** A page that sends the visitor on to the payment provider. */
const leaveFor = (title: string, url: string, label: string, id: string) => ({
  title,
  nav: 'billing',
  body: html`<p>
    <a id="${id}" class="button primary" href="${url}" rel="noreferrer">${label}</a>
  </p>`,
});

export function registerBillingActions(router: ConsoleRouter): void {
  router.action('/console/billing/topup', async (c) => {
    const answer = await c.api.call<TopupAnswer>('POST', '/v1/billing/topups', {
      body: { amountCents: cents(c.form.amount) },
    });
    return leaveFor(
      `Top-up of ${euros(answer.amountCents)}`,
      answer.checkoutUrl,
      'Continue to the payment page',
      'checkout',
    );
  });

  router.action('/console/billing/auto-recharge', async (c) => {
    await c.api.call('PUT', '/v1/billing/auto-recharge', {
      body: {
        enabled: ticked(c.form.enabled),
        thresholdCents: cents(c.form.threshold),
        amountCents: cents(c.form.amountEach),
        capCents: cents(c.form.cap),
      },
    });
    return redirect('/console/billing');
  });

  router.action('/console/billing/portal', async (c) => {
    const { url } = await c.api.call<{ url: string }>('POST', '/v1/billing/portal');
    return leaveFor('Payment portal', url, 'Open the payment portal', 'portal');
  });
}
