/**
 * The MCP clients people of the organization connected through OAuth (pier's
 * `GET /v1/oauth/grants`): client, verified or not, agent class and apps, scopes, until
 * when; revoking one (`DELETE /v1/oauth/grants/:id`) ends its access and refresh tokens.
 */
import type { GrantRecord } from '../../contracts/oauth.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { redirect, type PageContext } from '../router.js';
import type { PageFamily } from './family.js';
import { enc } from './form-values.js';
import { when, wide } from './widgets.js';

function grantsTable(c: PageContext, grants: GrantRecord[]): Html {
  if (grants.length === 0) return html`<p class="muted">No connected clients.</p>`;
  return wide(
    html`<table class="grants">
      <thead>
        <tr>
          <th>Client</th>
          <th>Agent class (apps)</th>
          <th>Scopes</th>
          <th>Given</th>
          <th>Until</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${grants.map(
          (g) =>
            html`<tr data-grant="${g.id}">
              <td>
                ${g.clientName ?? 'unnamed'}
                ${g.verified ? '' : html` <span class="muted">(unverified)</span>`}
                <br /><code class="muted">${g.clientId}</code>
              </td>
              <td>
                ${g.agent.class}
                <span class="muted"
                  >(${g.agent.apps ? g.agent.apps.join(' ') : 'all apps'}${
                    g.agent.prodDataRead ? ', prod data' : ''
                  })</span
                >
              </td>
              <td>${g.scopes.join(' ')}</td>
              <td>${when(g.createdAt)}</td>
              <td>${when(g.expiresAt)}</td>
              <td>
                <form
                  method="post"
                  action="/console/oauth/grants/${enc(g.id)}/revoke"
                  class="inline"
                >
                  ${csrfField(c.session.csrf)}
                  <button
                    type="submit"
                    class="danger"
                    data-confirm="Disconnect ${g.clientName ?? g.clientId}?"
                  >
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

export const oauthGrantsFamily: PageFamily = {
  nav: [{ key: 'mcp-clients', label: 'MCP clients', href: '/console/oauth/grants' }],
  register(router) {
    router.page('/console/oauth/grants', async (c) => {
      const grants = await c.api.call<GrantRecord[]>('GET', '/v1/oauth/grants');
      return {
        title: 'MCP clients',
        nav: 'mcp-clients',
        styles: [c.assets.url('data.css')],
        body: html`<p>
            Clients connected through OAuth act as agents with what the person chose. Revoking one
            ends its tokens at once.
          </p>
          ${grantsTable(c, grants)}`,
        commands: [
          { method: 'GET', path: '/v1/oauth/grants' },
          { method: 'DELETE', path: '/v1/oauth/grants/<id>' },
        ],
        scripts: [c.assets.url('data.js')],
      };
    });

    router.action('/console/oauth/grants/:id/revoke', async (c) => {
      await c.api.call('DELETE', `/v1/oauth/grants/${enc(c.params.id!)}`);
      return redirect('/console/oauth/grants');
    });
  },
};
