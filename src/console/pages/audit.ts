/**
 * The agent-action audit (spec 4.1 `GET /v1/agent-actions`, 5.4): every request of an
 * agent token that was judged, with its verdict, newest first. The route filters by
 * token (`token`) and caps the count (`limit`); it has no verdict filter, so the page
 * keeps the entries of the asked verdict itself, out of the `limit` the route gave.
 */
import type { AgentAction } from '../../contracts/agent-actions.js';
import type { KeyRecord } from '../../contracts/tokens.js';
import { html, type Html } from '../html.js';
import type { PageFamily } from './family.js';
import { enc } from './form-values.js';
import { when, wide } from './widgets.js';

const VERDICTS = ['allowed', 'refused'] as const;

function filterForm(keys: KeyRecord[], token: string, verdict: string, limit: string): Html {
  const agents = keys.filter((k) => k.agent);
  return html`<form method="get" action="/console/audit" class="filters">
    <label
      >Token
      <select name="token">
        <option value="">every agent token</option>
        ${agents.map(
          (k) =>
            html`<option value="${k.id}" ${k.id === token ? 'selected' : ''}>
              ${k.name} (${k.id})
            </option>`,
        )}
      </select></label
    >
    <label
      >Verdict
      <select name="verdict">
        <option value="">both</option>
        ${VERDICTS.map(
          (v) => html`<option value="${v}" ${v === verdict ? 'selected' : ''}>${v}</option>`,
        )}
      </select></label
    >
    <label>Last <input name="limit" value="${limit}" size="5" inputmode="numeric" /></label>
    <button type="submit">Show</button>
  </form>`;
}

function auditTable(entries: AgentAction[], names: Map<string, string>): Html {
  if (entries.length === 0) return html`<p class="muted">No judged requests.</p>`;
  return wide(
    html`<table class="audit">
      <thead>
        <tr>
          <th>When</th>
          <th>Token</th>
          <th>Request</th>
          <th>App</th>
          <th>Verdict</th>
        </tr>
      </thead>
      <tbody>
        ${entries.map(
          (a) =>
            html`<tr class="verdict-${a.verdict}" data-verdict="${a.verdict}">
              <td>${when(a.at)}</td>
              <td title="${a.tokenId}">${names.get(a.tokenId) ?? a.tokenId}</td>
              <td><code>${a.method} ${a.path}</code></td>
              <td>${a.app ?? ''}</td>
              <td>${a.verdict}${a.code ? html` <code>${a.code}</code>` : ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

export const auditFamily: PageFamily = {
  nav: [{ key: 'audit', label: 'Audit', href: '/console/audit' }],
  register(router) {
    router.page('/console/audit', async (c) => {
      const token = c.query.token ?? '';
      const verdict = c.query.verdict ?? '';
      const limit = c.query.limit ?? '100';
      // The route checks `limit` and `token`: a bad one shows its 400 sentence.
      const query = { limit, token: token || undefined };
      const [entries, keys] = await Promise.all([
        c.api.call<AgentAction[]>('GET', '/v1/agent-actions', { query }),
        c.api.call<KeyRecord[]>('GET', '/v1/tokens'),
      ]);
      const names = new Map(keys.map((k) => [k.id, k.name]));
      const shown = verdict ? entries.filter((a) => a.verdict === verdict) : entries;
      const path = `/v1/agent-actions?limit=${enc(limit)}${token ? `&token=${enc(token)}` : ''}`;
      return {
        title: 'Agent-action audit',
        nav: 'audit',
        styles: [c.assets.url('data.css')],
        body: html`${filterForm(keys, token, verdict, limit)} ${auditTable(shown, names)}`,
        commands: [{ method: 'GET', path }],
      };
    });
  },
};
