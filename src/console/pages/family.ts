/** A family of console pages: its navigation entries and the pages it declares. */
import type { NavEntry } from '../layout.js';
import type { ConsoleRouter } from '../router.js';

export interface PageFamily {
  /** Entries in the side navigation, in order (none for pages reached by link only). */
  nav: NavEntry[];
  register(router: ConsoleRouter): void;
}
