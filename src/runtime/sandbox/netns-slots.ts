/**
 * Network namespaces made ahead of the machines that will take them. What a machine's
 * network needs that depends on nothing of the machine (a user namespace with its maps,
 * a network namespace it owns with `lo` up, a veth pair with `eth0` inside) costs two
 * spawns and tens of milliseconds; made while pier is idle, a create only names the
 * slot and gives it the machine's address (network.ts).
 *
 * A slot is a live holder (userns.ts) and nothing else: no file names it, and its veth's
 * host end has a temporary name and is on no bridge. So a slot never carries traffic,
 * and one left by a crash is gone with its holder (whose stdin closes with pier): the
 * namespaces, and the veth pair with them, end with their last process.
 */
import { randomBytes } from 'node:crypto';
import { run } from './exec.js';
import { spawnNamespaceHolder, type NamespaceHolder } from './userns.js';

/** A holder whose namespaces are ready for a machine. */
export interface NetnsSlot {
  holder: NamespaceHolder;
  /** The host end of its veth pair: `pw` and 12 random hex digits until a machine takes it. */
  tempVeth: string;
}

/** Makes a slot now. */
export async function makeSlot(): Promise<NetnsSlot> {
  const holder = await spawnNamespaceHolder();
  const tempVeth = `pw${randomBytes(6).toString('hex')}`;
  try {
    const peer = ['peer', 'name', 'eth0', 'netns', String(holder.pid)];
    await run(['ip', 'link', 'add', tempVeth, 'type', 'veth', ...peer]);
    holder.send(['link set dev lo up']);
    return { holder, tempVeth };
  } catch (err) {
    holder.release();
    throw err;
  }
}

/** A few slots kept ready. */
export class NetnsSlots {
  private readonly ready: NetnsSlot[] = [];
  private filling = 0;
  private closed = false;

  constructor(private readonly size = 2) {}

  /** A ready slot, or one made now when none is (`fill` makes them ahead). */
  async take(): Promise<NetnsSlot> {
    let slot = this.ready.shift();
    while (slot?.holder.exited) slot = this.ready.shift(); // killed while it waited
    return slot ?? makeSlot();
  }

  /** Lets every ready slot go; none are made after. */
  close(): void {
    this.closed = true;
    for (const slot of this.ready.splice(0)) slot.holder.release();
  }

  /**
   * Makes slots until `size` are ready or being made. Called once a machine's start is
   * over, not when a slot is taken: two cores are better spent on the start under way.
   */
  fill(): void {
    while (!this.closed && this.ready.length + this.filling < this.size) {
      this.filling++;
      makeSlot()
        .then((slot) => {
          if (this.closed) slot.holder.release();
          else this.ready.push(slot);
        })
        .catch(() => {}) // the next take makes its own and reports what fails
        .finally(() => this.filling--);
    }
  }
}
