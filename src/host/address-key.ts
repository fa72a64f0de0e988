/**
 * The key a per-address limit counts a caller under. An IPv4 address is one caller; an
 * IPv6 address is not: a single host or home network is routinely given a whole /64, and
 * can draw a fresh address from it for every request, so a limit keyed by the full IPv6
 * address limits nothing. Every per-address limit therefore counts by this key:
 *
 * - IPv4 as it is (`203.0.113.7`);
 * - IPv4-mapped IPv6 (`::ffff:203.0.113.7`, as a dual-stack listener reports IPv4 peers)
 *   as the IPv4 address it carries, so one caller is not counted twice;
 * - any other IPv6 address as its /64 prefix, written `2001:db8:1:2::/64` (a zone such as
 *   `%eth0` is dropped);
 * - anything else (no address at all) as it is.
 */
import { isIPv4, isIPv6 } from 'node:net';

export function addressLimitKey(address: string): string {
  if (isIPv4(address)) return address;
  const plain = address.split('%')[0]!;
  if (!isIPv6(plain)) return address;
  const groups = hextets(plain.toLowerCase());
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  if (mapped)
    return [groups[6]! >> 8, groups[6]! & 255, groups[7]! >> 8, groups[7]! & 255].join('.');
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted tail split). */
function hextets(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const front = parse(head);
  if (tail === undefined) return front;
  const back = parse(tail);
  return [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
}
