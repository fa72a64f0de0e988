/**
 * The walls' ruleset text: what each input becomes, and that nftables accepts it (`nft
 * -c` checks against the kernel without changing anything). The walls in action are
 * tried from real machines in runtime/local/walls.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { REFUSED_V4_RANGES } from '../../host/outbound-guard.js';
import { run } from './exec.js';
import { ipv4Network, wallsRuleset, type WallsPlan } from './walls-ruleset.js';

const plan = (over: Partial<WallsPlan> = {}): WallsPlan => ({
  bridge: 'pier-rs0',
  cidr: '10.77.0.0/16',
  allowPrivate: false,
  refusedRanges: REFUSED_V4_RANGES,
  machines: [
    { id: 'mch-a', ip: '10.77.0.2', group: 'org-a', egress: { mode: 'open' }, hostPorts: [] },
    {
      id: 'mch-b',
      ip: '10.77.0.3',
      group: 'org-b',
      egress: { mode: 'allowlist', cidrs: ['203.0.113.7/24', 'not-a-cidr', '2001:db8::/32'] },
      hostPorts: [5432, 5432],
    },
    { id: 'mch-c', ip: '10.77.0.4', group: 'org-a', egress: { mode: 'deny-all' }, hostPorts: [] },
  ],
  ...over,
});

const canCheck = (() => {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('nft', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('walls ruleset', () => {
  it('puts each group’s machines in one set, and each machine’s egress in the egress map', () => {
    const text = wallsRuleset(plan());
    expect(text).toContain('set m0 { type ipv4_addr; elements = { 10.77.0.2, 10.77.0.4 } }');
    expect(text).toContain('set m1 { type ipv4_addr; elements = { 10.77.0.3 } }');
    expect(text).toContain('10.77.0.2 : accept, 10.77.0.3 : jump e1, 10.77.0.4 : drop');
    // The allowlist keeps IPv4 networks (host bits cleared) and drops the rest.
    expect(text).toContain(
      'set a1 { type ipv4_addr; flags interval; auto-merge; elements = { 203.0.113.0/24 } }',
    );
    expect(text).toContain(
      'set host_access { type ipv4_addr . inet_service; elements = { 10.77.0.3 . 5432 } }',
    );
  });

  it('refuses private, loopback and metadata ranges unless private targets are allowed', () => {
    expect(wallsRuleset(plan())).toMatch(
      /set refused \{[^}]*10\.0\.0\.0\/8[^}]*169\.254\.0\.0\/16/,
    );
    expect(wallsRuleset(plan({ allowPrivate: true }))).toMatch(
      /set refused \{ type ipv4_addr; flags interval; auto-merge; \}/,
    );
  });

  it('refuses to write anything that is not an address or an interface name', () => {
    const bad = plan();
    bad.machines[0]!.ip = '10.77.0.2 } ; flush ruleset';
    expect(() => wallsRuleset(bad)).toThrow(/invalid IPv4/);
    expect(() => wallsRuleset(plan({ bridge: 'x" accept' }))).toThrow(/invalid interface/);
  });

  it('opens port 53 of the resolver’s address only when the runtime runs one', () => {
    const rule = 'ip daddr 10.77.0.1 meta l4proto { udp, tcp } th dport 53 accept';
    expect(wallsRuleset(plan({ resolver: '10.77.0.1' }))).toContain(rule);
    expect(wallsRuleset(plan())).not.toContain('dport 53');
    expect(() => wallsRuleset(plan({ resolver: '10.77.0.1; flush ruleset' }))).toThrow(
      /invalid IPv4/,
    );
  });

  it('parses allowlist entries as IPv4 networks', () => {
    expect(ipv4Network('1.2.3.4')).toBe('1.2.3.4/32');
    expect(ipv4Network('1.2.3.4/8')).toBe('1.0.0.0/8');
    expect(ipv4Network('0.0.0.0/0')).toBe('0.0.0.0/0');
    expect(ipv4Network('1.2.3.4/33')).toBeUndefined();
    expect(ipv4Network('example.com')).toBeUndefined();
  });

  it.skipIf(!canCheck)('is accepted by nftables, empty or full', async () => {
    await run(['nft', '-c', '-f', '-'], 10_000, wallsRuleset(plan({ resolver: '10.77.0.1' })));
    await run(['nft', '-c', '-f', '-'], 10_000, wallsRuleset(plan({ machines: [] })));
  });
});
