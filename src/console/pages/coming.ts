/**
 * A navigation entry whose pages are not built yet: it answers a short page saying so
 * (and where the CLI or API already does it), rather than a 404.
 */
import { html } from '../html.js';
import type { PageFamily } from './family.js';

export function comingFamily(key: string, label: string, cli: string): PageFamily {
  return {
    nav: [{ key, label, href: `/console/${key}` }],
    register(router) {
      router.page(`/console/${key}`, async () => ({
        title: label,
        nav: key,
        body: html`<p class="coming">
          This page is coming. Until then, use the CLI (<code>${cli}</code>) or the API.
        </p>`,
      }));
    },
  };
}
