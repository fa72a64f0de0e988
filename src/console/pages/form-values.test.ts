import { describe, expect, it } from 'vitest';
import { listField, momentField, ticked, wholeNumber } from './form-values.js';

describe('form values', () => {
  it('split lists on commas, spaces and lines', () => {
    expect(listField(' read, deploy:web\nmail:send ')).toEqual(['read', 'deploy:web', 'mail:send']);
    expect(listField('')).toEqual([]);
    expect(listField(undefined)).toEqual([]);
  });

  it('read checkboxes and numbers, leaving bad numbers for the route', () => {
    expect(ticked('on')).toBe(true);
    expect(ticked(undefined)).toBe(false);
    expect(wholeNumber(' 12 ')).toBe(12);
    expect(wholeNumber('twelve')).toBe('twelve');
    expect(wholeNumber('')).toBeUndefined();
  });

  it('turn a local moment and the browser offset into UTC', () => {
    // Berlin in winter: getTimezoneOffset() is -60 (one hour ahead of UTC).
    expect(momentField('2026-11-24T15:30', '-60')).toBe('2026-11-24T14:30:00.000Z');
    expect(momentField('2026-11-24T15:30', '300')).toBe('2026-11-24T20:30:00.000Z');
    expect(momentField('2026-11-24T15:30', undefined)).toBe('2026-11-24T15:30:00.000Z');
    expect(momentField('2026-11-24T15:30:10', 'x')).toBe('2026-11-24T15:30:10.000Z');
    expect(momentField('yesterday', '0')).toBe('yesterday');
    expect(momentField(' ', '0')).toBeUndefined();
  });
});
