/** Host names as the edge accepts them: custom domains and zones (spec 4.8, 8: 1–253). */
import { parse } from 'tldts';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * Why `name` (already lower-cased, no trailing dot) is not a host name a customer may
 * claim, or undefined when it is: at least two labels, LDH labels of 1–63, no wildcard,
 * not an IP address (the last label is not all digits), and not a public suffix.
 */
export function hostnameProblem(name: string): string | undefined {
  if (name.length < 1 || name.length > 253) return 'must be 1–253 characters';
  if (name.includes('*')) return 'wildcards are not accepted; claim the zone instead';
  const suffix = publicSuffixOf(name);
  if (suffix) return `'${suffix}' is a public suffix, shared by many owners; claim a name below it`;
  const labels = name.split('.');
  if (labels.length < 2) return 'must have at least two labels (example.com)';
  if (!labels.every((l) => LABEL.test(l)))
    return 'labels are letters, digits and inner hyphens, 1–63 characters each';
  if (/^[0-9]+$/.test(labels.at(-1)!)) return 'must be a host name, not an address';
  return undefined;
}

/** Lower-cased, without the trailing dot: the form names are stored and compared in. */
export function canonicalHost(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, '');
}

/** Whether `name` is `zone` itself or below it. */
export function isWithin(name: string, zone: string): boolean {
  return name === zone || name.endsWith('.' + zone);
}

/**
 * `name` when it is itself a public suffix (`com`, `co.uk`, `github.io`: names under which
 * unrelated parties register theirs), by the Public Suffix List that `tldts` carries, with
 * its private section: one organization proving such a name would answer for everyone's.
 * Names outside the list (`example.test`) take the list's default rule, which makes only
 * their last label a suffix.
 */
export function publicSuffixOf(name: string): string | undefined {
  const parsed = parse(name, { allowPrivateDomains: true });
  const listed = parsed.isIcann === true || parsed.isPrivate === true;
  return listed && parsed.publicSuffix === name ? name : undefined;
}
