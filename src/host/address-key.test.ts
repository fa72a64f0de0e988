import { describe, expect, it } from 'vitest';
import { addressLimitKey } from './address-key.js';

describe('addressLimitKey', () => {
  it('keeps an IPv4 address as it is', () => {
    expect(addressLimitKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressLimitKey('127.0.0.1')).toBe('127.0.0.1');
  });

  it('counts an IPv4-mapped IPv6 address as its IPv4 address', () => {
    expect(addressLimitKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressLimitKey('::FFFF:cb00:7107')).toBe('203.0.113.7');
  });

  it('puts every address of one /64 under one key, and other /64s under others', () => {
    const a = addressLimitKey('2001:db8:1:2::a');
    expect(a).toBe('2001:db8:1:2::/64');
    expect(addressLimitKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe(a);
    expect(addressLimitKey('2001:DB8:1:2:1234::1%eth0')).toBe(a);
    expect(addressLimitKey('2001:db8:1:3::a')).not.toBe(a);
    expect(addressLimitKey('::1')).toBe('0:0:0:0::/64');
    expect(addressLimitKey('fe80::1:2:3:4')).toBe('fe80:0:0:0::/64');
    expect(addressLimitKey('2001:db8::')).toBe('2001:db8:0:0::/64');
    expect(addressLimitKey('64:ff9b::192.0.2.33')).toBe('64:ff9b:0:0::/64');
  });

  it('leaves what is not an address alone', () => {
    expect(addressLimitKey('')).toBe('');
    expect(addressLimitKey('unknown')).toBe('unknown');
  });
});
