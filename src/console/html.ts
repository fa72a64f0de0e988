/**
 * HTML templates as plain tagged template strings. Every interpolated value is escaped
 * unless it is already `Html` (another template's output, or `raw()` on a string the code
 * itself wrote): markup cannot come from data by accident.
 *
 *   html`<p>${user.email}</p>`            // escaped
 *   html`<ul>${items.map((i) => html`<li>${i}</li>`)}</ul>`  // arrays are joined
 */

/** Markup that is safe to send as is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** What a template may interpolate: nothing, text, numbers, markup, or lists of them. */
export type Interpolation = Html | string | number | boolean | null | undefined | Interpolation[];

function render(value: Interpolation): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Interpolation[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

/** Markup the code wrote itself (never data): sent without escaping. */
export function raw(text: string): Html {
  return new Html(text);
}
