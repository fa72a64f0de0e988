/**
 * The current IPv4 addresses of the domain names in machines' egress allowlists. The
 * walls allow addresses, not names, so the host resolves each name and asks again when
 * its answer's TTL runs out (bounded to [minRefreshMs, 5 min]): an allowed service that
 * moves keeps working. A failed lookup keeps the last good answer (a DNS hiccup must not
 * cut a machine off), and a name that never resolved allows nothing.
 */
import { Resolver } from 'node:dns/promises';

/** Options of {@link EgressNames}. */
export interface EgressNamesOptions {
  /** DNS servers (`ip` or `ip:port`); default the host's own. */
  servers?: string[];
  /** Shortest wait between two lookups of a name (default 5 s). */
  minRefreshMs?: number;
  /** Called when some name's addresses changed after a refresh. */
  onChange: () => void;
  log: { warn(obj: object, msg: string): void };
}

const MAX_REFRESH_MS = 5 * 60_000;
const LOOKUP_TIMEOUT_MS = 3000;

interface Entry {
  addresses: string[];
  dueAt: number;
}

/** Names → addresses, kept fresh for the names in use. */
export class EgressNames {
  private readonly resolver: Resolver;
  private readonly entries = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;
  private wanted = new Set<string>();

  constructor(private readonly opts: EgressNamesOptions) {
    this.resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: 2 });
    if (opts.servers?.length) this.resolver.setServers(opts.servers);
  }

  /**
   * The addresses of each of `names` (looked up now when never seen), and from now on
   * these are the names kept fresh; the others are forgotten.
   */
  async addresses(names: Iterable<string>): Promise<Map<string, string[]>> {
    this.wanted = new Set(names);
    for (const name of this.entries.keys()) if (!this.wanted.has(name)) this.entries.delete(name);
    await Promise.all(
      [...this.wanted].filter((n) => !this.entries.has(n)).map((n) => this.refresh(n)),
    );
    this.schedule();
    return new Map([...this.wanted].map((n) => [n, this.entries.get(n)?.addresses ?? []]));
  }

  /**
   * What the last lookup of `name` gave and for how many more seconds it holds (at least
   * 1), or undefined for a name not kept: the machines' resolver answers with this, so a
   * machine resolves an allowed name to exactly the addresses its walls let through.
   */
  current(name: string): { addresses: string[]; ttlS: number } | undefined {
    const e = this.entries.get(name);
    if (!e) return undefined;
    return { addresses: e.addresses, ttlS: Math.max(1, Math.ceil((e.dueAt - Date.now()) / 1000)) };
  }

  /** Looks `name` up; whether its addresses changed. */
  private async refresh(name: string): Promise<boolean> {
    const min = this.opts.minRefreshMs ?? 5000;
    const before = this.entries.get(name)?.addresses ?? [];
    try {
      const answers = await this.resolver.resolve4(name, { ttl: true });
      const ttlMs = Math.min(...answers.map((a) => a.ttl * 1000), MAX_REFRESH_MS);
      const addresses = [...new Set(answers.map((a) => a.address))].sort();
      this.entries.set(name, { addresses, dueAt: Date.now() + Math.max(min, ttlMs) });
      return addresses.join() !== before.join();
    } catch (err) {
      this.opts.log.warn({ name, err: (err as Error).message }, 'egress name did not resolve');
      this.entries.set(name, { addresses: before, dueAt: Date.now() + Math.max(min, 30_000) });
      return false;
    }
  }

  /** Arms the timer for the next name due (unref'd: it never keeps pier alive). */
  private schedule(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const due = [...this.entries.values()].map((e) => e.dueAt);
    if (due.length === 0) return;
    this.timer = setTimeout(() => void this.tick(), Math.max(0, Math.min(...due) - Date.now()));
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const now = Date.now();
    const due = [...this.entries].filter(([, e]) => e.dueAt <= now).map(([n]) => n);
    const changed = await Promise.all(due.map((n) => this.refresh(n)));
    this.schedule();
    if (changed.some(Boolean)) this.opts.onChange();
  }

  /** Stops refreshing. */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
