import { describe, expect, it } from 'vitest';
import {
  allocateIp,
  gatewayOf,
  intToIp,
  ipToInt,
  isMachineIp,
  networkOf,
  overlaps,
  parseCidr,
} from './cidr.js';
import { netnsName, vethName } from './names.js';

describe('cidr', () => {
  it('converts addresses both ways and refuses malformed ones', () => {
    expect(ipToInt('10.213.0.1')).toBe(0x0ad50001);
    expect(intToIp(0xffffffff)).toBe('255.255.255.255');
    expect(intToIp(ipToInt('192.168.1.20'))).toBe('192.168.1.20');
    for (const bad of ['10.0.0', '10.0.0.256', '01.2.3.4', '1.2.3.4.5', 'a.b.c.d', '']) {
      expect(() => ipToInt(bad)).toThrow(/invalid IPv4/);
    }
  });

  it('parses networks and refuses host bits, odd prefixes and junk', () => {
    expect(parseCidr('10.213.0.0/16')).toEqual({ network: 0x0ad50000, prefix: 16 });
    expect(gatewayOf('10.213.0.0/16')).toBe('10.213.0.1');
    expect(() => parseCidr('10.213.0.1/16')).toThrow(/host bits/);
    expect(() => parseCidr('10.0.0.0/31')).toThrow(/8\.\.30/);
    expect(() => parseCidr('10.0.0.0/4')).toThrow(/8\.\.30/);
    expect(() => parseCidr('10.0.0.0')).toThrow(/invalid CIDR/);
    expect(() => parseCidr('10.0.0.0/16/1')).toThrow(/invalid CIDR/);
  });

  it('gives machines neither the network, the gateway nor the broadcast address', () => {
    expect(isMachineIp('10.213.0.0/16', '10.213.0.2')).toBe(true);
    expect(isMachineIp('10.213.0.0/16', '10.213.255.254')).toBe(true);
    for (const ip of ['10.213.0.0', '10.213.0.1', '10.213.255.255', '10.214.0.2']) {
      expect(isMachineIp('10.213.0.0/16', ip)).toBe(false);
    }
  });

  it('allocates the lowest free address and says when the network is full', () => {
    expect(allocateIp('10.213.0.0/16', new Set())).toBe('10.213.0.2');
    expect(allocateIp('10.213.0.0/16', new Set(['10.213.0.2', '10.213.0.3']))).toBe('10.213.0.4');
    expect(allocateIp('10.213.0.0/16', new Set(['10.213.0.3']))).toBe('10.213.0.2');
    // A /30 holds a gateway and one machine.
    expect(allocateIp('10.9.9.0/30', new Set())).toBe('10.9.9.2');
    expect(() => allocateIp('10.9.9.0/30', new Set(['10.9.9.2']))).toThrow(/no free address/);
  });
});

describe('names', () => {
  it('derives a netns name and a short, stable veth name from the id', () => {
    expect(netnsName('m-1')).toBe('pier-m-1');
    const long = `m${'x'.repeat(62)}`;
    expect(vethName(long)).toHaveLength(13);
    expect(vethName(long)).toBe(vethName(long));
    expect(vethName('a')).not.toBe(vethName('b'));
    for (const bad of ['', 'A', '../x', 'a/b', '-a', 'a b', 'x'.repeat(64)]) {
      expect(() => netnsName(bad)).toThrow(/invalid sandbox id/);
    }
  });
});

describe('overlaps and networkOf', () => {
  it('tells networks that share addresses', () => {
    expect(overlaps('10.1.0.0/16', '10.1.128.0/17')).toBe(true);
    expect(overlaps('10.1.0.0/16', '10.2.0.0/16')).toBe(false);
    expect(overlaps('10.0.0.0/8', '10.200.0.0/16')).toBe(true);
  });

  it('finds the network of an interface address', () => {
    expect(networkOf('10.215.3.7', 16)).toBe('10.215.0.0/16');
    expect(networkOf('192.0.2.2', 24)).toBe('192.0.2.0/24');
  });
});
