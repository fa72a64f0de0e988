import { describe, expect, it } from 'vitest';
import { short, slotted, usageCharts } from './usage-chart.js';

const from = new Date('2026-11-01T00:00:00Z');
const to = new Date('2026-11-05T00:00:00Z');

describe('usage chart', () => {
  it('sums events per kind into equal slots, leaving out what falls outside', () => {
    const series = slotted(
      [
        { kind: 'machine_running_seconds', quantity: 10, at: '2026-11-01T01:00:00Z' },
        { kind: 'machine_running_seconds', quantity: 5, at: '2026-11-01T23:00:00Z' },
        { kind: 'machine_running_seconds', quantity: 7, at: '2026-11-04T12:00:00Z' },
        { kind: 'bucket_bytes', quantity: 2048, at: '2026-11-02T00:00:00Z' },
        { kind: 'bucket_bytes', quantity: 1, at: '2026-11-05T00:00:00Z' },
      ],
      from,
      to,
      4,
    );
    expect(series).toEqual([
      { kind: 'bucket_bytes', slots: [0, 2048, 0, 0], total: 2048 },
      { kind: 'machine_running_seconds', slots: [15, 0, 0, 7], total: 22 },
    ]);
  });

  it('draws one SVG per kind with presentation attributes only (no style)', () => {
    const svg = usageCharts(
      slotted([{ kind: 'k<1>', quantity: 3, at: '2026-11-02T00:00:00Z' }], from, to, 4),
      from,
      to,
    ).text;
    expect(svg.match(/<svg/g)).toHaveLength(1);
    expect(svg.match(/<rect/g)).toHaveLength(4);
    expect(svg).toContain('k&lt;1&gt;');
    expect(svg).not.toMatch(/style=|<style/);
    expect(usageCharts([], from, to).text).toContain('No usage');
  });

  it('shortens axis numbers', () => {
    expect(short(1500)).toBe('1.5k');
    expect(short(2_000_000)).toBe('2M');
    expect(short(0.123)).toBe('0.12');
  });
});
