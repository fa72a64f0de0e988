/**
 * Reading the console's posted form fields into `/v1` bodies: lists typed as text,
 * checkboxes, whole numbers and the moment pickers. A value the form cannot read as asked
 * goes to the route as it is, so the route's 400 names the field (the console holds no
 * validation of its own).
 */

/** Words of a text field separated by commas, spaces or new lines (empty: none). */
export function listField(value: string | undefined): string[] {
  return (value ?? '').split(/[\s,]+/).filter((w) => w.length > 0);
}

/** A checkbox: present (any value) means ticked. */
export function ticked(value: string | undefined): boolean {
  return value !== undefined && value !== '';
}

/** A whole number, or the text itself (for the route to refuse), or undefined when empty. */
export function wholeNumber(value: string | undefined): number | string | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  return /^\d+$/.test(v) ? Number(v) : v;
}

/**
 * `<input type="datetime-local">` gives a wall-clock time without a zone
 * (`2026-11-24T15:30`). data.js fills the form's `tzOffset` field with the browser's
 * `Date#getTimezoneOffset()` (minutes behind UTC), so the moment is the person's own;
 * without script the field is empty and the time is read as UTC (the form says so).
 * Answers an ISO timestamp, the text itself when it is not a time (the route refuses
 * it), or undefined when empty.
 */
export function momentField(
  local: string | undefined,
  tzOffset: string | undefined,
): string | undefined {
  const v = local?.trim();
  if (!v) return undefined;
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/.test(v)) return v;
  const offset = /^-?\d{1,4}$/.test(tzOffset ?? '') ? Number(tzOffset) : 0;
  const utc = Date.parse(`${v}Z`);
  if (Number.isNaN(utc)) return v;
  return new Date(utc + offset * 60_000).toISOString();
}

/** Path segments and query values in console links. */
export const enc = encodeURIComponent;
