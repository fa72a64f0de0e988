/**
 * Names derived from a machine id: its network namespace, the host side of its veth
 * pair. Ids are validated once here, so nothing that reaches `ip`, a mount or a path can
 * carry a slash, a dot-dot or an option.
 */
import { createHash } from 'node:crypto';

const ID = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** Throws unless `id` is a valid sandbox id: lowercase letters, digits, `-`, `_`; ≤ 63. */
export function assertSandboxId(id: string): void {
  if (!ID.test(id)) throw new Error(`invalid sandbox id: ${JSON.stringify(id)}`);
}

/** The machine's network namespace: `pier-<id>` (a file under /run/netns). */
export function netnsName(id: string): string {
  assertSandboxId(id);
  return `pier-${id}`;
}

/**
 * The host end of the machine's veth pair: `pv` and 11 hex digits of a hash of the id,
 * as interface names hold at most 15 characters and ids may be longer.
 */
export function vethName(id: string): string {
  assertSandboxId(id);
  return `pv${createHash('sha256').update(id).digest('hex').slice(0, 11)}`;
}
