/**
 * An app's edge settings (spec 4.6): protection (mode, a password shown once, signed
 * links, rotate), the network policy and the public UDP endpoints, each with its form.
 * A generated password is answered on the page the form's post renders, never in a
 * redirect's address, and not shown again.
 */
import type { NetworkPolicy } from '../../contracts/network-policy.js';
import {
  PROTECTION_PASSWORD_MIN,
  type CreatedLink,
  type Protection,
} from '../../contracts/protection.js';
import type { UdpEndpoint } from '../../contracts/udp.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { redirect, type PageContext, type View } from '../router.js';
import type { PageFamily } from './family.js';
import { enc, wholeNumber } from './form-values.js';
import { shownOnce, when } from './widgets.js';

export const edgePath = (app: string) => `/console/apps/${enc(app)}/edge`;
const v1 = (app: string) => `/v1/apps/${enc(app)}`;

const post = (c: PageContext, action: string, inner: Html, cls = 'stack') =>
  html`<form method="post" action="${action}" class="${cls}">
    ${csrfField(c.session.csrf)}${inner}
  </form>`;

function protectionSection(c: PageContext, app: string, p: Protection, shown?: string): Html {
  const base = edgePath(app);
  return html`<h2>Protection</h2>
    <p>Mode: <strong data-mode="${p.mode}">${p.mode}</strong></p>
    ${shown ? shownOnce('The password', shown) : ''}
    ${post(
      c,
      `${base}/protection`,
      html`<label
          >Mode
          <select name="mode">
            <option value="public">public</option>
            <option value="password">password</option>
            <option value="signed">signed links and tokens</option>
          </select></label
        >
        <label
          >Password (password mode; empty: pier makes one)
          <input
            name="password"
            type="password"
            autocomplete="new-password"
            minlength="${PROTECTION_PASSWORD_MIN}"
        /></label>
        <button type="submit" class="primary">Set protection</button>`,
    )}
    ${
      p.mode === 'public'
        ? ''
        : html`${post(c, `${base}/rotate`, html`<button type="submit" data-confirm="Rotate? Every link and token stops working.">Rotate password and signing secret</button>`, 'inline')}
            <h3>Signed links</h3>
            ${
              p.links.length === 0
                ? html`<p class="muted">No links.</p>`
                : html`<ul class="links">
                    ${p.links.map(
                      (l) =>
                        html`<li data-link="${l.id}">
                          ${l.label} · expires ${l.expiresAt ? when(l.expiresAt) : 'never'}
                          ${post(c, `${base}/unlink`, html`<input type="hidden" name="id" value="${l.id}" /><button type="submit" class="danger">Revoke</button>`, 'inline')}
                        </li>`,
                    )}
                  </ul>`
            }
            ${post(
              c,
              `${base}/links`,
              html`<label>Label <input name="label" required maxlength="64" /></label>
                <label>Expires at (optional, ISO 8601) <input name="expiresAt" /></label>
                <button type="submit">Create link</button>`,
            )}`
    }`;
}

function policySection(c: PageContext, app: string, n: NetworkPolicy): Html {
  const value = (v: number | null) => (v === null ? '' : String(v));
  return html`<h2>Network policy</h2>
    ${post(
      c,
      `${edgePath(app)}/policy`,
      html`<label
          >Bandwidth, Mbit/s (empty: no limit)
          <input name="bandwidthMbit" inputmode="numeric" value="${value(n.bandwidthMbit)}"
        /></label>
        <label
          >New connections per minute (empty: no limit)
          <input
            name="newConnectionsPerMinute"
            inputmode="numeric"
            value="${value(n.newConnectionsPerMinute)}"
        /></label>
        <label>Reason <input name="reason" maxlength="500" value="${n.reason ?? ''}" /></label>
        <button type="submit" class="primary">Set policy</button>`,
    )}`;
}

function udpSection(c: PageContext, app: string, list: UdpEndpoint[]): Html {
  return html`<h2>UDP endpoints</h2>
    ${
      list.length === 0
        ? html`<p class="muted">No UDP endpoints.</p>`
        : html`<ul class="udp">
            ${list.map(
              (u) =>
                html`<li data-udp="${u.id}">
                  <code>${u.address}</code> → port ${String(u.targetPort)}
                  ${post(c, `${edgePath(app)}/udp-delete`, html`<input type="hidden" name="id" value="${u.id}" /><button type="submit" class="danger">Close</button>`, 'inline')}
                </li>`,
            )}
          </ul>`
    }
    ${post(
      c,
      `${edgePath(app)}/udp`,
      html`<label
          >Target port (empty: the app's port) <input name="targetPort" inputmode="numeric"
        /></label>
        <button type="submit">Open a UDP endpoint</button>`,
    )}`;
}

async function edgePage(c: PageContext, app: string, shown?: string): Promise<View> {
  const [p, n, u] = await Promise.all([
    c.api.call<Protection>('GET', `${v1(app)}/protection`),
    c.api.call<NetworkPolicy>('GET', `${v1(app)}/policy/network`),
    c.api.call<UdpEndpoint[]>('GET', `${v1(app)}/udp`),
  ]);
  return {
    title: `App ${app}: edge`,
    nav: 'apps',
    body: html`<p>
        <a href="/console/apps/${enc(app)}">Back to ${app}</a> ·
        <a href="/console/apps/${enc(app)}/domains">Custom domains</a>
      </p>
      ${protectionSection(c, app, p, shown)} ${policySection(c, app, n)} ${udpSection(c, app, u)}`,
    commands: [
      { pier: `pier protect show ${app}`, method: 'GET', path: `${v1(app)}/protection` },
      {
        pier: `pier protect password ${app}`,
        method: 'PUT',
        path: `${v1(app)}/protection`,
        body: { mode: 'password' },
      },
    ],
  };
}

export const appEdgeFamily: PageFamily = {
  nav: [],
  register(router) {
    router.page('/console/apps/:name/edge', async (c) => edgePage(c, c.params.name!));

    router.action('/console/apps/:name/edge/protection', async (c) => {
      const app = c.params.name!;
      const body: Record<string, unknown> = { mode: c.form.mode ?? '' };
      if (c.form.password) body.password = c.form.password;
      const p = await c.api.call<Protection>('PUT', `${v1(app)}/protection`, { body });
      return p.password ? edgePage(c, app, p.password) : redirect(edgePath(app));
    });
    router.action('/console/apps/:name/edge/rotate', async (c) => {
      const app = c.params.name!;
      const p = await c.api.call<Protection>('POST', `${v1(app)}/protection/rotate`);
      return p.password ? edgePage(c, app, p.password) : redirect(edgePath(app));
    });
    router.action('/console/apps/:name/edge/links', async (c) => {
      const app = c.params.name!;
      const body: Record<string, unknown> = { label: c.form.label ?? '' };
      if (c.form.expiresAt?.trim()) body.expiresAt = c.form.expiresAt.trim();
      const link = await c.api.call<CreatedLink>('POST', `${v1(app)}/protection/links`, { body });
      const page = await edgePage(c, app);
      return {
        ...page,
        body: html`<p class="notice">Link: <code data-link-url>${link.url}</code></p>
          ${page.body}`,
      };
    });
    router.action('/console/apps/:name/edge/unlink', async (c) => {
      const app = c.params.name!;
      await c.api.call('DELETE', `${v1(app)}/protection/links/${enc(c.form.id ?? '')}`);
      return redirect(edgePath(app));
    });
    router.action('/console/apps/:name/edge/policy', async (c) => {
      const app = c.params.name!;
      const body: Record<string, unknown> = {
        bandwidthMbit: wholeNumber(c.form.bandwidthMbit) ?? null,
        newConnectionsPerMinute: wholeNumber(c.form.newConnectionsPerMinute) ?? null,
      };
      if (c.form.reason?.trim()) body.reason = c.form.reason.trim();
      await c.api.call('PUT', `${v1(app)}/policy/network`, { body });
      return redirect(edgePath(app));
    });
    router.action('/console/apps/:name/edge/udp', async (c) => {
      const app = c.params.name!;
      const targetPort = wholeNumber(c.form.targetPort);
      await c.api.call('POST', `${v1(app)}/udp`, {
        body: targetPort === undefined ? {} : { targetPort },
      });
      return redirect(edgePath(app));
    });
    router.action('/console/apps/:name/edge/udp-delete', async (c) => {
      const app = c.params.name!;
      await c.api.call('DELETE', `${v1(app)}/udp/${enc(c.form.id ?? '')}`);
      return redirect(edgePath(app));
    });
  },
};
