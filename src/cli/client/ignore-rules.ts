/**
 * The ignore files `pier deploy` honours when it packs a directory: `.dockerignore`
 * (Docker's rules: patterns anchored at the top of the tree, a match of a directory
 * covers what is under it, `!` may re-include anything) or, without one, `.gitignore`
 * files (git's rules: a pattern without a slash matches at any depth below its file, a
 * trailing `/` matches directories only, nested files refine their parent's, and nothing
 * under an ignored directory comes back). Both: `*`, `?`, `[…]`, `**`, `!`, `#`, `\`;
 * the last matching pattern wins.
 */

export type IgnoreFlavour = 'docker' | 'git';

interface Rule {
  negate: boolean;
  dirOnly: boolean;
  /** Matched against the path relative to `base` (git) or to the top (docker). */
  regex: RegExp;
  /** The directory of the ignore file, relative to the top, '' or ending in '/'. */
  base: string;
}

/** An ordered list of ignore patterns, later ones overriding earlier ones. */
export class IgnoreRules {
  private readonly rules: Rule[] = [];

  constructor(readonly flavour: IgnoreFlavour) {}

  /** Adds the lines of an ignore file found in `dir` (relative to the top, '' for the top). */
  add(text: string, dir = ''): this {
    const base = dir === '' ? '' : `${dir.replace(/\/+$/, '')}/`;
    for (const raw of text.split(/\r?\n/)) {
      const rule = this.flavour === 'docker' ? dockerRule(raw) : gitRule(raw, base);
      if (rule) this.rules.push(rule);
    }
    return this;
  }

  /** Whether any pattern re-includes (`!`): Docker then looks inside ignored directories. */
  get hasNegations(): boolean {
    return this.rules.some((r) => r.negate);
  }

  /** Whether `rel` (a path relative to the top, `/`-separated) is ignored. */
  ignores(rel: string, isDir: boolean): boolean {
    let ignored = false;
    for (const rule of this.rules) {
      if (rule.negate !== ignored) continue; // it could not change the answer
      if (this.flavour === 'docker' ? dockerMatch(rule, rel) : gitMatch(rule, rel, isDir)) {
        ignored = !rule.negate;
      }
    }
    return ignored;
  }
}

/** Docker: trimmed, cleaned like Go's filepath.Clean, leading `/` dropped. */
function dockerRule(raw: string): Rule | undefined {
  let line = raw.trim();
  if (line === '' || line.startsWith('#')) return undefined;
  const negate = line.startsWith('!');
  if (negate) line = line.slice(1).trim();
  line = cleanPath(line).replace(/^\/+/, '');
  if (line === '' || line === '.') return undefined;
  return {
    negate,
    dirOnly: false,
    regex: new RegExp(`^${globToRegex(line, 'docker')}$`),
    base: '',
  };
}

/** Docker matches the path itself or any of its parent directories. */
function dockerMatch(rule: Rule, rel: string): boolean {
  const parts = rel.split('/');
  for (let n = parts.length; n >= 1; n--) {
    if (rule.regex.test(parts.slice(0, n).join('/'))) return true;
  }
  return false;
}

/** Git: comments, escapes, trailing blanks, `!`, a trailing `/`, anchoring by a slash. */
function gitRule(raw: string, base: string): Rule | undefined {
  // Trailing blanks go unless escaped with a backslash.
  let line = raw.replace(/(?<!\\)[ \t]+$/, '');
  if (line === '' || line.startsWith('#')) return undefined;
  let negate = false;
  if (line.startsWith('!')) {
    negate = true;
    line = line.slice(1);
  } else if (line.startsWith('\\!') || line.startsWith('\\#')) {
    line = line.slice(1);
  }
  const dirOnly = line.endsWith('/');
  line = line.replace(/\/+$/, '');
  if (line === '') return undefined;
  const anchored = line.includes('/');
  line = line.replace(/^\/+/, '');
  const body = globToRegex(line, 'git');
  // Without a slash the pattern names an entry at any depth below the file.
  const regex = new RegExp(anchored ? `^${body}$` : `^(?:.*/)?${body}$`);
  return { negate, dirOnly, regex, base };
}

function gitMatch(rule: Rule, rel: string, isDir: boolean): boolean {
  if (rule.dirOnly && !isDir) return false;
  if (!rel.startsWith(rule.base)) return false;
  return rule.regex.test(rel.slice(rule.base.length));
}

/**
 * A glob as a regular expression body. `*` and `?` never cross a `/`; `[…]` is a class
 * (`[!…]` negated); `\x` is a literal x. `**`: in git, `**\/` at the start or after a
 * slash is any number of directories, a final `/**` everything inside, and elsewhere it is
 * a `*`; in Docker `**` is any number of directories wherever it stands.
 */
function globToRegex(glob: string, flavour: IgnoreFlavour): string {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string;
    if (ch === '*' && glob[i + 1] === '*') {
      let j = i + 2;
      while (glob[j] === '*') j++;
      if (flavour === 'docker') {
        // moby/patternmatcher: a `/` after `**` is part of it; `**` last is everything.
        if (glob[j] === '/') j++;
        out += j === glob.length ? '.*' : '(?:.*/)?';
      } else if (i !== 0 && glob[i - 1] !== '/') out += '[^/]*';
      else if (j === glob.length) out += '.*';
      else if (glob[j] === '/') {
        out += '(?:.*/)?';
        j++;
      } else out += '[^/]*';
      i = j - 1;
    } else if (ch === '*') out += '[^/]*';
    else if (ch === '?') out += '[^/]';
    else if (ch === '[') {
      const end = classEnd(glob, i);
      if (end < 0) out += '\\[';
      else {
        let inner = glob.slice(i + 1, end);
        const negated = inner.startsWith('!') || inner.startsWith('^');
        if (negated) inner = inner.slice(1);
        inner = inner.replace(/\\(.)/g, '$1').replace(/[\\\]^]/g, '\\$&');
        out += `[${negated ? '^' : ''}${inner}]`;
        i = end;
      }
    } else if (ch === '\\' && i + 1 < glob.length) {
      out += escapeRegex(glob[i + 1] as string);
      i++;
    } else out += escapeRegex(ch);
  }
  return out;
}

/** The index of the `]` closing the class opened at `start`, or -1. */
function classEnd(glob: string, start: number): number {
  let i = start + 1;
  if (glob[i] === '!' || glob[i] === '^') i++;
  if (glob[i] === ']') i++; // a leading ] is a member
  for (; i < glob.length; i++) {
    if (glob[i] === '\\') i++;
    else if (glob[i] === ']') return i;
  }
  return -1;
}

function escapeRegex(ch: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(ch) ? `\\${ch}` : ch;
}

/** Go's filepath.Clean for `/` paths: no empty, `.` or resolvable `..` segments. */
function cleanPath(p: string): string {
  const absolute = p.startsWith('/');
  const out: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..' && out.length > 0 && out[out.length - 1] !== '..') out.pop();
    else if (seg === '..' && absolute) continue;
    else out.push(seg);
  }
  const joined = out.join('/');
  return absolute ? `/${joined}` : joined || '.';
}
