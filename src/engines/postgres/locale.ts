/**
 * ICU locales of new databases. PostgreSQL 15's initdb accepts any string as an ICU
 * locale (ICU silently falls back to its root rules), so a locale is checked against the
 * locales the server's own ICU lists in pg_collation. Spellings are normalized (`de_de`
 * and `de-DE` are one locale, one template) to BCP 47 casing.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { EngineError } from '../engine.js';

const SYNTAX = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The BCP 47 spelling of `locale` (`de_de` → `de-DE`, `sr_latn_rs` → `sr-Latn-RS`):
 * language lower case, a four-letter script title case, a region upper case, and
 * everything from a singleton (`-u-`, `-x-`) on lower case. Throws 'unsupported' when the
 * text is not made of letters, digits, `-` and `_`.
 */
export function normalizeLocale(locale: string): string {
  if (
    typeof locale !== 'string' ||
    !SYNTAX.test(locale) ||
    /(^[-_])|([-_]$)|[-_]{2}/.test(locale)
  ) {
    throw new EngineError(
      'unsupported',
      `The locale ${JSON.stringify(String(locale))} is not a locale name: use letters, digits, ` +
        `"-" and "_" only, as in "de-DE" or "sr-Latn-RS".`,
    );
  }
  const parts = locale.split(/[-_]/);
  let extension = false;
  return parts
    .map((part, i) => {
      if (i === 0) return part.toLowerCase();
      if (extension || part.length === 1) {
        extension = true;
        return part.toLowerCase();
      }
      if (part.length === 4 && /^[A-Za-z]+$/.test(part)) {
        return part[0]!.toUpperCase() + part.slice(1).toLowerCase();
      }
      if (part.length === 2 || /^\d{3}$/.test(part)) return part.toUpperCase();
      return part.toLowerCase();
    })
    .join('-');
}

/** The error for a locale that passes the syntax check but that ICU does not know. */
export function unknownLocale(locale: string): EngineError {
  return new EngineError(
    'unsupported',
    `The locale "${locale}" is not known to ICU on this host; use a language tag such as ` +
      `"de-DE", "fr", or "zh-Hant-TW".`,
  );
}

/**
 * The ICU locales a major version's server knows, learned from the first template built
 * and remembered under the state directory, so an unknown locale fails at once next time.
 */
export class KnownLocales {
  private readonly known = new Map<number, Set<string>>();

  constructor(private readonly stateDir: string) {}

  private file(major: number): string {
    return path.join(this.stateDir, 'postgres', `icu-locales-${major}.json`);
  }

  /** Whether `locale` is known, or undefined when no server of `major` has been asked yet. */
  async has(major: number, locale: string): Promise<boolean | undefined> {
    let set = this.known.get(major);
    if (!set) {
      const text = await readFile(this.file(major), 'utf8').catch(() => undefined);
      if (!text) return undefined;
      set = new Set((JSON.parse(text) as string[]).map((l) => l.toLowerCase()));
      this.known.set(major, set);
    }
    return set.has(locale.toLowerCase());
  }

  /** Records the locales a server of `major` listed. */
  async learn(major: number, locales: string[]): Promise<void> {
    this.known.set(major, new Set(locales.map((l) => l.toLowerCase())));
    const file = this.file(major);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await writeFile(`${file}.tmp`, JSON.stringify(locales));
    await rename(`${file}.tmp`, file);
  }
}
