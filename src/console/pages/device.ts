/**
 * Device-login approval (spec 4.1, 5.8): `verificationUriComplete` opens
 * `/console/device?userCode=…`; the page shows what the pending login asks for
 * (`POST /v1/device/lookup`) and approves or declines it with one click
 * (`POST /v1/device/approve`).
 */
import { html } from '../html.js';
import { csrfField } from '../layout.js';
import type { PageFamily } from './family.js';

interface Lookup {
  client: string | null;
  version: string | null;
  requestedFrom: string;
  requestedAt: string;
  expiresAt: string;
}

const codeForm = html`<form method="get" action="/console/device" class="stack">
  <label>Code shown by <code>pier login</code> <input name="userCode" required /></label>
  <button type="submit" class="primary">Continue</button>
</form>`;

export const deviceFamily: PageFamily = {
  nav: [],
  register(router) {
    router.page('/console/device', async (c) => {
      const userCode = c.query.userCode?.trim();
      if (!userCode) return { title: 'Approve a device', nav: '', body: codeForm };
      const ask = await c.api.call<Lookup>('POST', '/v1/device/lookup', { body: { userCode } });
      return {
        title: 'Approve a device',
        nav: '',
        body: html`<p>
            A command-line client asks to sign in as you in <b>${c.session.org.name}</b>. Approve
            only if you started it.
          </p>
          <dl class="facts">
            <dt>Code</dt>
            <dd><code class="user-code">${userCode}</code></dd>
            <dt>Client</dt>
            <dd class="client">${ask.client ?? 'unnamed'} ${ask.version ?? ''}</dd>
            <dt>Requested from</dt>
            <dd class="requested-from">${ask.requestedFrom}</dd>
            <dt>Requested at</dt>
            <dd><time datetime="${ask.requestedAt}">${ask.requestedAt}</time></dd>
            <dt>Expires at</dt>
            <dd><time datetime="${ask.expiresAt}">${ask.expiresAt}</time></dd>
          </dl>
          <form method="post" action="/console/device" class="actions">
            ${csrfField(c.session.csrf)}
            <input type="hidden" name="userCode" value="${userCode}" />
            <button type="submit" name="decision" value="approve" class="primary">Approve</button>
            <button type="submit" name="decision" value="deny" class="danger">Deny</button>
          </form>`,
        commands: [{ method: 'POST', path: '/v1/device/lookup', body: { userCode } }],
      };
    });

    router.action('/console/device', async (c) => {
      const userCode = c.form.userCode ?? '';
      const approve = c.form.decision === 'approve';
      const done = await c.api.call<{ approved: boolean }>('POST', '/v1/device/approve', {
        body: { userCode, approve },
      });
      return {
        title: done.approved ? 'Device approved' : 'Device denied',
        nav: '',
        body: done.approved
          ? html`<p class="notice">
              Approved. The client receives its key; return to your terminal.
            </p>`
          : html`<p class="notice">Denied. The client is told so and gets no key.</p>`,
        commands: [{ method: 'POST', path: '/v1/device/approve', body: { userCode, approve } }],
      };
    });
  },
};
