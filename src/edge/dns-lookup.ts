/**
 * The DNS questions domain and zone checks ask (CONTRACT 6 `PIER_DNS_RESOLVER`): a
 * configured server (`HOST:PORT`, tests: a DNS server on loopback) or the system's.
 * Absent records are answers, not failures: they come back empty.
 */
import { promises as dns } from 'node:dns';

const ABSENT = new Set(['ENODATA', 'ENOTFOUND', 'NXDOMAIN', 'ENONAME']);

export class DnsLookup {
  private readonly resolver = new dns.Resolver({ timeout: 3000, tries: 2 });

  constructor(server?: string) {
    if (server) this.resolver.setServers([server]);
  }

  /** The TXT values of `name`, each record's strings joined. */
  async txt(name: string): Promise<string[]> {
    return (await this.absentAsEmpty(this.resolver.resolveTxt(name))).map((r) => r.join(''));
  }

  /** The CNAME targets of `name`, lower-cased, without the trailing dot. */
  async cname(name: string): Promise<string[]> {
    return (await this.absentAsEmpty(this.resolver.resolveCname(name))).map(normalize);
  }

  /** The IPv4 and IPv6 addresses of `name`. */
  async addresses(name: string): Promise<string[]> {
    const [v4, v6] = await Promise.all([
      this.absentAsEmpty(this.resolver.resolve4(name)),
      this.absentAsEmpty(this.resolver.resolve6(name)),
    ]);
    return [...v4, ...v6];
  }

  private async absentAsEmpty<T>(p: Promise<T[]>): Promise<T[]> {
    try {
      return await p;
    } catch (err) {
      if (ABSENT.has((err as NodeJS.ErrnoException).code ?? '')) return [];
      throw err;
    }
  }
}

export function normalize(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}
