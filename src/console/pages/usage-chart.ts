/**
 * The usage chart of the billing page: one small bar chart per usage kind (kinds have
 * different units: seconds, bytes…, so each gets its own scale), the period cut into
 * equal slots, rendered on the server as inline SVG. No script and no CSS in the markup
 * (the CSP allows neither inline): colours are SVG presentation attributes, which are
 * not CSS, and each bar carries a `<title>` the browser shows on hover.
 */
import { html, type Html } from '../html.js';

export interface UsageEvent {
  kind: string;
  quantity: number;
  at: string;
}

export interface Series {
  kind: string;
  /** The sum of each slot, oldest first. */
  slots: number[];
  total: number;
}

/** Sums events per kind into `count` equal slots of [from, to). */
export function slotted(events: UsageEvent[], from: Date, to: Date, count: number): Series[] {
  const start = from.getTime();
  const width = Math.max(1, to.getTime() - start) / count;
  const byKind = new Map<string, Series>();
  for (const e of events) {
    const i = Math.floor((Date.parse(e.at) - start) / width);
    if (i < 0 || i >= count) continue;
    let s = byKind.get(e.kind);
    if (!s)
      byKind.set(e.kind, (s = { kind: e.kind, slots: new Array<number>(count).fill(0), total: 0 }));
    s.slots[i]! += e.quantity;
    s.total += e.quantity;
  }
  return [...byKind.values()].sort((a, b) => a.kind.localeCompare(b.kind));
}

const WIDTH = 600;
const HEIGHT = 140;
const LEFT = 56;
const BOTTOM = 20;
const COLOURS = ['#1f5fbf', '#1e7b34', '#b35c00', '#7a3fb3', '#b3261e', '#00707a'];

/** A number short enough for an axis label. */
export function short(n: number): string {
  const units: [number, string][] = [
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k'],
  ];
  for (const [size, unit] of units)
    if (Math.abs(n) >= size) return `${+(n / size).toFixed(1)}${unit}`;
  return String(+n.toFixed(2));
}

const day = (d: Date) => d.toISOString().slice(0, 16).replace('T', ' ');

function chart(s: Series, colour: string, from: Date, to: Date): Html {
  const max = Math.max(...s.slots, 0) || 1;
  const plotW = WIDTH - LEFT;
  const plotH = HEIGHT - BOTTOM;
  const barW = plotW / s.slots.length;
  const span = (to.getTime() - from.getTime()) / s.slots.length;
  const bars = s.slots.map((q, i) => {
    const h = (q / max) * (plotH - 4);
    const slotFrom = new Date(from.getTime() + i * span);
    return html`<rect
      x="${(LEFT + i * barW + 1).toFixed(1)}"
      y="${(plotH - h).toFixed(1)}"
      width="${Math.max(1, barW - 2).toFixed(1)}"
      height="${h.toFixed(1)}"
      fill="${colour}"
      ><title>${day(slotFrom)} UTC: ${short(q)}</title></rect
    >`;
  });
  return html`<figure class="usage-chart" data-kind="${s.kind}">
    <figcaption><code>${s.kind}</code> — total ${short(s.total)}</figcaption>
    <svg
      xmlns="http://www.w3.org/2000/svg"
      viewBox="0 0 ${WIDTH} ${HEIGHT}"
      width="${WIDTH}"
      height="${HEIGHT}"
      role="img"
      aria-label="${s.kind} per slot, ${day(from)} to ${day(to)} UTC"
    >
      <line x1="${LEFT}" y1="${plotH}" x2="${WIDTH}" y2="${plotH}" stroke="#5b6575" />
      <line x1="${LEFT}" y1="0" x2="${LEFT}" y2="${plotH}" stroke="#5b6575" />
      <text x="${LEFT - 4}" y="12" text-anchor="end" font-size="11" fill="#5b6575">
        ${short(max)}
      </text>
      <text x="${LEFT - 4}" y="${plotH}" text-anchor="end" font-size="11" fill="#5b6575">0</text>
      <text x="${LEFT}" y="${HEIGHT - 4}" font-size="11" fill="#5b6575">${day(from)}</text>
      <text x="${WIDTH}" y="${HEIGHT - 4}" text-anchor="end" font-size="11" fill="#5b6575">
        ${day(to)} UTC
      </text>
      ${bars}
    </svg>
  </figure>`;
}

/** One chart per kind, or a sentence when the period has no usage. */
export function usageCharts(series: Series[], from: Date, to: Date): Html {
  if (series.length === 0) return html`<p class="muted">No usage in this period.</p>`;
  return html`${series.map((s, i) => chart(s, COLOURS[i % COLOURS.length]!, from, to))}`;
}
