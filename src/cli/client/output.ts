/** Printing: raw JSON for scripts, aligned tables and key/value blocks for people. */

/** Prints a value as indented JSON (the `--json` form of every read command). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Prints lines to stdout. */
export function say(...lines: string[]): void {
  for (const line of lines) process.stdout.write(`${line}\n`);
}

/**
 * Renders rows under headers with columns padded to their widest cell, two spaces
 * apart. The last column is not padded so lines carry no trailing blanks.
 */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** Prints a table, or `empty` when there are no rows (a bare header says nothing). */
export function printTable(headers: string[], rows: string[][], empty: string): void {
  say(rows.length === 0 ? empty : table(headers, rows));
}

/** Prints `label: value` pairs with the values aligned; pairs with undefined values are left out. */
export function printFields(fields: [string, string | undefined][]): void {
  const shown = fields.filter((f): f is [string, string] => f[1] !== undefined);
  const width = Math.max(...shown.map(([k]) => k.length + 1));
  say(...shown.map(([k, v]) => `${`${k}:`.padEnd(width)}  ${v}`));
}

/** A timestamp shortened to the minute in UTC ("2025-01-31 14:05Z"); '-' when absent. */
export function when(iso: string | undefined): string {
  if (!iso) return '-';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 16).replace('T', ' ')}Z`;
}
