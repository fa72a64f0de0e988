/**
 * A bucket's CORS rules (spec 4.5 `GET`/`PUT /v1/buckets/:name/cors`): the rules as JSON
 * in a text area, with the route's warnings, replaced as a whole on save (an empty list
 * removes them). Text that is not JSON goes to the route as a string, so its 400 names
 * the field. The console's own uploads need no rule (same origin, see buckets.ts).
 */
import type { Cors } from '../../contracts/buckets.js';
import { html } from '../html.js';
import { csrfField } from '../layout.js';
import { redirect, type ConsoleRouter } from '../router.js';
import { enc } from './form-values.js';

const EXAMPLE = [{ allowedMethods: ['GET', 'PUT'], allowedOrigins: ['https://example.com'] }];

function parsedOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function bucketCorsPages(router: ConsoleRouter): void {
  router.page('/console/buckets/:name/cors', async (c) => {
    const name = c.params.name!;
    const cors = await c.api.call<Cors>('GET', `/v1/buckets/${enc(name)}/cors`);
    const path = `/v1/buckets/${enc(name)}/cors`;
    return {
      title: `CORS rules of ${name}`,
      nav: 'buckets',
      styles: [c.assets.url('data.css')],
      body: html`<p><a href="/console/buckets/${enc(name)}">Back to ${name}</a></p>
        <p class="muted">
          Rules let pages of other sites call this bucket through the S3 gateway. The console's
          uploads need none: the gateway answers on the console's own origin.
        </p>
        ${(cors.warnings ?? []).map((w) => html`<p class="refusal">${w}</p>`)}
        <form method="post" action="/console/buckets/${enc(name)}/cors" class="stack cors">
          ${csrfField(c.session.csrf)}
          <label
            >Rules (JSON list; empty list removes them; e.g.
            <code>${JSON.stringify(EXAMPLE)}</code>)
            <textarea name="rules" rows="12" cols="80">
${JSON.stringify(cors.rules, null, 2)}</textarea>
          </label>
          <button type="submit" class="primary">Save rules</button>
        </form>`,
      commands: [
        { pier: `pier buckets cors ${name}`, method: 'GET', path },
        {
          pier: `pier buckets cors ${name} --set rules.json`,
          method: 'PUT',
          path,
          body: { rules: EXAMPLE },
        },
      ],
    };
  });

  router.action('/console/buckets/:name/cors', async (c) => {
    const name = c.params.name!;
    const rules = parsedOrText(c.form.rules ?? '');
    await c.api.call('PUT', `/v1/buckets/${enc(name)}/cors`, { body: { rules } });
    return redirect(`/console/buckets/${enc(name)}/cors`);
  });
}
