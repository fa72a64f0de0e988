/** What the `pier db` files share: option parsers (the server checks ranges) and notes. */
import { InvalidArgumentError } from 'commander';

/** A whole number (MB, GB, seconds), or commander's own "invalid argument" error. */
export function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('give a whole number.');
  return Number(value);
}

/**
 * A moment in ISO 8601, sent to the API in UTC. The API wants an offset; a person typing
 * `2025-06-01 14:30` means their own clock, so a zone-less time is read as local time.
 * The date prefix is required because `Date` parses stray input ("1") as some year.
 */
export function moment(value: string): string {
  const at = /^\d{4}-\d\d-\d\d/.test(value.trim()) ? new Date(value.trim()) : undefined;
  if (!at || Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError('give an ISO 8601 time, e.g. 2025-06-01T14:30:00Z.');
  }
  return at.toISOString();
}

/** Notes for the person go to stderr, so stdout holds only what a script wants (a URL). */
export function note(text: string): void {
  process.stderr.write(`${text}\n`);
}
