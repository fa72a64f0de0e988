/**
 * The page around every console view: navigation, the person and organization, the
 * route's refusal if there was one, the view, and its equivalent commands. No inline
 * script or style anywhere (the CSP forbids both): behaviour comes from console.js and
 * htmx attributes, looks from console.css.
 */
import type { Assets } from './assets.js';
import { equivalentPanel, type Equivalent } from './equivalent.js';
import { html, raw, type Html } from './html.js';
import { CSRF_FIELD } from './session.js';

export interface NavEntry {
  /** Marks the entry as the current one when a view names it. */
  key: string;
  label: string;
  href: string;
}

export interface Viewer {
  email: string | null;
  role: string | null;
  org: { id: string; name: string };
  csrf: string;
}

export interface LayoutInput {
  title: string;
  nav: string;
  body: Html;
  commands?: Equivalent[];
  /** Extra scripts of this page (asset URLs). */
  scripts?: string[];
  styles?: string[];
}

/** htmx settings: nothing eval'd, no injected style, and error answers swapped in too. */
const HTMX_CONFIG = JSON.stringify({
  includeIndicatorStyles: false,
  allowEval: false,
  allowScriptTags: false,
  selfRequestsOnly: true,
  responseHandling: [
    { code: '204', swap: false },
    { code: '...', swap: true },
  ],
});

function head(assets: Assets, title: string, styles: string[] = [], scripts: string[] = []): Html {
  return html`<meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="htmx-config" content="${HTMX_CONFIG}" />
    <title>${title} · pier console</title>
    <link rel="stylesheet" href="${assets.url('console.css')}" />
    ${styles.map((s) => html`<link rel="stylesheet" href="${s}" />`)}
    <script src="${assets.url('htmx.min.js')}" defer></script>
    <script src="${assets.url('console.js')}" defer></script>
    ${scripts.map((s) => html`<script src="${s}" defer></script>`)}`;
}

/** A form field carrying the session's CSRF token. */
export function csrfField(csrf: string): Html {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${csrf}" />`;
}

export function errorBox(refusal: { status: number; code: string; message: string }): Html {
  return html`<div class="refusal" role="alert">
    <strong>${refusal.message}</strong>
    <span class="code">${refusal.status} ${refusal.code}</span>
  </div>`;
}

export function layout(assets: Assets, nav: NavEntry[], viewer: Viewer, input: LayoutInput): Html {
  const headers = JSON.stringify({ 'X-CSRF-Token': viewer.csrf });
  return html`${raw('<!doctype html>')}
    <html lang="en">
      <head>
        ${head(assets, input.title, input.styles, input.scripts)}
      </head>
      <body hx-headers="${headers}">
        <header class="top">
          <a class="brand" href="/console">pier</a>
          <span class="who">
            <span class="org" title="${viewer.org.id}">${viewer.org.name}</span>
            <span class="email">${viewer.email ?? 'API key'}</span>
          </span>
          <form method="post" action="/console/sign-out" class="sign-out">
            ${csrfField(viewer.csrf)}
            <button type="submit">Sign out</button>
          </form>
        </header>
        <nav class="side" aria-label="Sections">
          <ul>
            ${nav.map(
              (n) =>
                html`<li>
                  <a href="${n.href}" ${n.key === input.nav ? raw('aria-current="page"') : ''}
                    >${n.label}</a
                  >
                </li>`,
            )}
          </ul>
        </nav>
        <main>
          <h1>${input.title}</h1>
          ${input.body}
        </main>
        ${equivalentPanel(input.commands ?? [])}
      </body>
    </html>`;
}

/** A page for signed-out visitors (sign-in): no navigation, no session. */
export function bareLayout(assets: Assets, title: string, body: Html): Html {
  return html`${raw('<!doctype html>')}
    <html lang="en">
      <head>
        ${head(assets, title)}
      </head>
      <body class="bare">
        <main>
          <h1>${title}</h1>
          ${body}
        </main>
      </body>
    </html>`;
}
