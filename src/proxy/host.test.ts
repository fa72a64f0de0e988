import { describe, expect, it } from 'vitest';
import { normalizePublicHost, parseAppHost } from './host.js';

describe('normalizePublicHost', () => {
  it('keeps the host name only', () => {
    expect(normalizePublicHost('Example.COM')).toBe('example.com');
    expect(normalizePublicHost('127.0.0.1:8080')).toBe('127.0.0.1');
    expect(normalizePublicHost('http://pier.example.com:8443/')).toBe('pier.example.com');
    expect(normalizePublicHost('example.com.')).toBe('example.com');
    expect(normalizePublicHost('[::1]:8080')).toBe('[::1]');
  });
});

describe('parseAppHost', () => {
  const pub = 'example.com';

  it('names the app of <app>.<public host>, case and port aside', () => {
    expect(parseAppHost('shop.example.com', pub)).toEqual({ app: 'shop' });
    expect(parseAppHost('SHOP.Example.Com:8080', pub)).toEqual({ app: 'shop' });
    expect(parseAppHost('shop.example.com.', pub)).toEqual({ app: 'shop' });
    expect(parseAppHost('my-app-2.example.com', pub)).toEqual({ app: 'my-app-2' });
    expect(parseAppHost('app.127.0.0.1:8080', '127.0.0.1')).toEqual({ app: 'app' });
  });

  it('names an exposed port with <port>.<app>.<public host>', () => {
    expect(parseAppHost('9000.shop.example.com', pub)).toEqual({ app: 'shop', port: 9000 });
    // An app named like a port or ending in digits is still just an app.
    expect(parseAppHost('8080.example.com', pub)).toEqual({ app: '8080' });
    expect(parseAppHost('shop-8080.example.com', pub)).toEqual({ app: 'shop-8080' });
    expect(parseAppHost('65536.shop.example.com', pub)).toBeUndefined();
    expect(parseAppHost('0.shop.example.com', pub)).toBeUndefined();
    expect(parseAppHost('08.shop.example.com', pub)).toBeUndefined();
  });

  it('leaves the API host and other domains to the API', () => {
    expect(parseAppHost('example.com', pub)).toBeUndefined();
    expect(parseAppHost('example.com:8080', pub)).toBeUndefined();
    expect(parseAppHost('shop.other.com', pub)).toBeUndefined();
    expect(parseAppHost('shopexample.com', pub)).toBeUndefined();
    expect(parseAppHost('a.b.c.example.com', pub)).toBeUndefined();
    expect(parseAppHost('x.shop.example.com', pub)).toBeUndefined();
    expect(parseAppHost(undefined, pub)).toBeUndefined();
    expect(parseAppHost('', pub)).toBeUndefined();
  });

  it('refuses labels that are not app names', () => {
    expect(parseAppHost('-shop.example.com', pub)).toBeUndefined();
    expect(parseAppHost('shop-.example.com', pub)).toBeUndefined();
    expect(parseAppHost('sh_op.example.com', pub)).toBeUndefined();
    expect(parseAppHost(`${'a'.repeat(64)}.example.com`, pub)).toBeUndefined();
    expect(parseAppHost(`${'a'.repeat(63)}.example.com`, pub)).toEqual({ app: 'a'.repeat(63) });
    expect(parseAppHost('.example.com', pub)).toBeUndefined();
  });
});
