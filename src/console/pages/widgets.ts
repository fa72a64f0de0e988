/** Small pieces of markup the data pages share: moment pickers and the shown-once box. */
import { html, type Html } from '../html.js';

/**
 * A moment picker: `datetime-local` plus the hidden `tzOffset` that data.js fills with
 * the browser's offset (form-values.ts `momentField` reads the pair).
 */
export function momentPicker(name: string, label: string, required = false): Html {
  return html`<label
      >${label} <span class="muted tz-note">(your local time; UTC without script)</span>
      <input type="datetime-local" name="${name}" step="1" ${required ? 'required' : ''} />
    </label>
    <input type="hidden" name="tzOffset" class="tz-offset" value="" />`;
}

/**
 * A secret value the route hands out once (a new key, a database URL): shown in this
 * answer only, never stored by the console, gone when the page is reloaded.
 */
export function shownOnce(what: string, value: string): Html {
  return html`<div class="shown-once notice" role="status">
    <p><strong>${what}</strong> — shown this once; copy it now, it cannot be shown again.</p>
    <pre class="cmd"><code class="once-value">${value}</code></pre>
  </div>`;
}

/** A date as the list pages show it, to the minute (the full time in `datetime`), or a dash. */
export function when(value: string | null | undefined): Html {
  return value
    ? html`<time datetime="${value}">${value.replace('T', ' ').slice(0, 16)}</time>`
    : html`<span class="muted">—</span>`;
}

/** A table that scrolls sideways inside the page rather than under the commands panel. */
export function wide(table: Html): Html {
  return html`<div class="table-wrap">${table}</div>`;
}
