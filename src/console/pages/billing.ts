/**
 * Billing you can read (spec 2.9, 4.7): the balance, the ledger, and usage over a period
 * with a chart per kind (usage-chart.ts). Each section is its own route call and shows
 * that route's refusal in place (an organization that is not prepaid has no credit
 * account: 409 `not-prepaid`), so one refusal does not hide the rest of the page.
 *
 * Below the balance, `#billing-actions` holds the top-up, auto-recharge and portal forms
 * (billing-actions.ts).
 */
import type { CreditAccount, LedgerPage, UsageList } from '../../contracts/billing.js';
import { Refusal } from '../api.js';
import { html, type Html } from '../html.js';
import { errorBox } from '../layout.js';
import { billingActions, euros, registerBillingActions, topupReturn } from './billing-actions.js';
import type { PageFamily } from './family.js';
import { enc } from './form-values.js';
import { slotted, usageCharts } from './usage-chart.js';
import { when, wide } from './widgets.js';

/** Periods the page offers: length and how many slots the chart cuts it into. */
const PERIODS: Record<string, { ms: number; slots: number; label: string }> = {
  '24h': { ms: 24 * 3600_000, slots: 24, label: 'last 24 hours (hourly)' },
  '7d': { ms: 7 * 24 * 3600_000, slots: 28, label: 'last 7 days (6-hourly)' },
  '30d': { ms: 30 * 24 * 3600_000, slots: 30, label: 'last 30 days (daily)' },
};

/** The route's answer, or its refusal as a box where the section would be. */
async function orRefusal<T>(call: Promise<T>, show: (value: T) => Html): Promise<Html> {
  try {
    return show(await call);
  } catch (err) {
    if (err instanceof Refusal && err.status !== 401) return errorBox(err);
    throw err;
  }
}

function balance(a: CreditAccount): Html {
  return html`<dl class="facts balance">
    <dt>Balance</dt>
    <dd class="balance-amount">${euros(a.balanceCents)}</dd>
    <dt>State</dt>
    <dd>
      ${a.blocked ? html`<span class="bad">blocked since ${when(a.blockedAt)}</span>` : a.warned ? 'below the warning line' : 'ok'}
    </dd>
    <dt>Priced usage</dt>
    <dd>${a.priced.length ? a.priced.join(', ') : html`<span class="muted">none yet</span>`}</dd>
    <dt>Auto-recharge</dt>
    <dd class="auto-recharge-state">
      ${a.autoRecharge.enabled ? `below ${euros(a.autoRecharge.thresholdCents)}, add ${euros(a.autoRecharge.amountCents)} (at most ${euros(a.autoRecharge.capCents)} in total)` : 'off'}
      ${a.autoRecharge.pending ? html` · <span class="muted">a charge is in flight</span>` : ''}
      ${a.autoRecharge.failedAt ? html` · <span class="bad">the last charge failed ${when(a.autoRecharge.failedAt)}; save the rule again to retry</span>` : ''}
    </dd>
    <dt>Saved card</dt>
    <dd>${a.autoRecharge.hasPaymentMethod ? 'yes' : 'none yet'}</dd>
  </dl>`;
}

function ledger(page: LedgerPage): Html {
  if (page.entries.length === 0) return html`<p class="muted">No entries.</p>`;
  return wide(
    html`<table class="ledger">
      <thead>
        <tr>
          <th>When</th>
          <th>Kind</th>
          <th>Amount</th>
          <th>Detail</th>
        </tr>
      </thead>
      <tbody>
        ${page.entries.map(
          (e) =>
            html`<tr data-kind="${e.kind}">
              <td>${when(e.at)}</td>
              <td>${e.kind}</td>
              <td>${euros(e.amountCents)}</td>
              <td>${e.detail ?? e.reference ?? ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

function usage(list: UsageList, slots: number): Html {
  const from = new Date(list.period.from);
  const to = new Date(list.period.to);
  return html`${
    list.truncated
      ? html`<p class="refusal">Only the first ${list.limit} events of the period are drawn.</p>`
      : ''
  }
  ${usageCharts(slotted(list.events, from, to, slots), from, to)}`;
}

function periodPicker(current: string): Html {
  return html`<form method="get" action="/console/billing" class="filters">
    <label
      >Usage of the
      <select name="period">
        ${Object.entries(PERIODS).map(
          ([key, p]) =>
            html`<option value="${key}" ${key === current ? 'selected' : ''}>${p.label}</option>`,
        )}
      </select></label
    >
    <button type="submit">Show</button>
  </form>`;
}

export const billingFamily: PageFamily = {
  nav: [{ key: 'billing', label: 'Billing', href: '/console/billing' }],
  register(router) {
    registerBillingActions(router);
    router.page('/console/billing', async (c) => {
      const key = c.query.period && PERIODS[c.query.period] ? c.query.period : '30d';
      const period = PERIODS[key]!;
      const to = new Date();
      const from = new Date(to.getTime() - period.ms);
      const usageQuery = { from: from.toISOString(), to: to.toISOString() };
      let account: CreditAccount | undefined;
      const [credits, entries, used, returned] = await Promise.all([
        orRefusal(c.api.call<CreditAccount>('GET', '/v1/billing/credits'), (a) => {
          account = a;
          return balance(a);
        }),
        orRefusal(
          c.api.call<LedgerPage>('GET', '/v1/billing/ledger', { query: { limit: '50' } }),
          ledger,
        ),
        orRefusal(c.api.call<UsageList>('GET', '/v1/usage', { query: usageQuery }), (l) =>
          usage(l, period.slots),
        ),
        orRefusal(topupReturn(c), (h) => h),
      ]);
      return {
        title: 'Billing',
        nav: 'billing',
        styles: [c.assets.url('data.css')],
        body: html`<h2>Balance</h2>
          ${returned} ${credits}
          <section id="billing-actions" aria-label="Top-up and auto-recharge">
            ${billingActions(c, account)}
          </section>
          <h2>Usage</h2>
          ${periodPicker(key)} ${used}
          <h2>Ledger</h2>
          ${entries}`,
        commands: [
          { method: 'GET', path: '/v1/billing/credits' },
          { method: 'GET', path: '/v1/billing/ledger?limit=50' },
          {
            method: 'GET',
            path: `/v1/usage?from=${enc(usageQuery.from)}&to=${enc(usageQuery.to)}`,
          },
        ],
      };
    });
  },
};
