/**
 * The images a Dockerfile builds on: every `FROM` that is not `scratch` or an earlier
 * stage. pier pulls them itself, through its outbound guard and registry rules, and hands
 * them to the builder as local OCI layouts (`FROM oci:<dir>`), so the builder never
 * reaches a registry on its own: it runs with no network at all.
 *
 * Reads what Dockerfiles say in practice: line continuations, comments, `ARG`s before
 * the first `FROM` (their defaults fill `${NAME}` in FROM lines), `--platform=`, `AS name`.
 * An image named only in `COPY --from=` or `RUN --mount=…,from=` is refused: it would
 * bypass the guard (the build has no network, so it would fail anyway, less clearly).
 */

/** A Dockerfile problem the customer fixes; the build fails with this message. */
export class DockerfileError extends Error {
  override name = 'DockerfileError';
}

/** One external image of a Dockerfile, where its FROM line is. */
export interface BaseImage {
  ref: string;
}

interface Instruction {
  /** Index into the logical lines. */
  line: number;
  keyword: string;
  args: string;
}

/** Logical lines: continuations joined, comments and blank lines kept as they are. */
function logicalLines(text: string): string[] {
  const out: string[] = [];
  let acc: string | undefined;
  for (const raw of text.split(/\r?\n/)) {
    if (acc !== undefined && /^\s*#/.test(raw)) continue; // a comment inside a continuation
    const cont = /\\\s*$/.test(raw);
    const part = cont ? raw.replace(/\\\s*$/, '') : raw;
    acc = acc === undefined ? part : `${acc} ${part.trim()}`;
    if (!cont) {
      out.push(acc);
      acc = undefined;
    }
  }
  if (acc !== undefined) out.push(acc);
  return out;
}

function instructions(lines: string[]): Instruction[] {
  const out: Instruction[] = [];
  lines.forEach((l, line) => {
    const m = /^\s*([A-Za-z]+)\s*(.*)$/.exec(l);
    if (!m || /^\s*#/.test(l)) return;
    out.push({ line, keyword: m[1]!.toUpperCase(), args: m[2]!.trim() });
  });
  return out;
}

/** `${NAME}`, `$NAME` and `${NAME:-default}` from `args`; throws on a name it lacks. */
function expand(value: string, args: Map<string, string>): string {
  return value.replace(
    /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g,
    (_m, a, dflt, b) => {
      const name = (a ?? b) as string;
      const v = args.get(name) ?? (dflt as string | undefined);
      if (v === undefined) {
        throw new DockerfileError(
          `FROM uses \${${name}}, which no ARG before the first FROM sets.`,
        );
      }
      return v;
    },
  );
}

/**
 * Rewrites a Dockerfile so that each external base image is `oci:<layout>` of
 * `layoutOf(ref)`; returns the new text. `layoutOf` is called once per distinct image.
 */
export async function rewriteBases(
  text: string,
  layoutOf: (ref: string) => Promise<string>,
): Promise<{ text: string; bases: string[] }> {
  const lines = logicalLines(text);
  const globalArgs = new Map<string, string>();
  const stages = new Set<string>();
  const layouts = new Map<string, string>();
  let seenFrom = false;
  for (const ins of instructions(lines)) {
    if (ins.keyword === 'ARG' && !seenFrom) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(ins.args);
      if (m?.[2] !== undefined) globalArgs.set(m[1]!, m[2].replace(/^"(.*)"$/, '$1'));
      continue;
    }
    if (ins.keyword === 'FROM') {
      seenFrom = true;
      const words = ins.args.split(/\s+/).filter(Boolean);
      const flags = words.filter((w) => w.startsWith('--'));
      const rest = words.filter((w) => !w.startsWith('--'));
      const image = rest[0];
      if (!image) throw new DockerfileError('A FROM line names no image.');
      if (rest.length !== 1 && !(rest.length === 3 && rest[1]!.toUpperCase() === 'AS')) {
        throw new DockerfileError(`Cannot read the line "FROM ${ins.args}".`);
      }
      const ref = expand(image, globalArgs);
      const alias = rest[2]?.toLowerCase();
      let target = ref;
      if (ref.toLowerCase() !== 'scratch' && !stages.has(ref.toLowerCase())) {
        if (/^[a-z-]+:\//.test(ref) || ref.startsWith('oci:') || ref.includes('://')) {
          throw new DockerfileError(`FROM ${ref}: only registry references are allowed.`);
        }
        let layout = layouts.get(ref);
        if (!layout) {
          layout = await layoutOf(ref);
          layouts.set(ref, layout);
        }
        target = `oci:${layout}`;
      }
      lines[ins.line] = ['FROM', ...flags, target, ...(alias ? ['AS', alias] : [])].join(' ');
      if (alias) stages.add(alias);
      continue;
    }
    if (ins.keyword === 'COPY' || ins.keyword === 'RUN' || ins.keyword === 'ADD') {
      for (const m of ins.args.matchAll(/(?:^|[\s,])(?:--)?from=([^\s,]+)/g)) {
        const from = m[1]!.toLowerCase();
        if (!stages.has(from) && !/^\d+$/.test(from)) {
          throw new DockerfileError(
            `${ins.keyword} takes files from the image ${m[1]}: name it in a FROM stage (FROM ${m[1]} AS x) and use --from=x.`,
          );
        }
      }
    }
  }
  if (!seenFrom) throw new DockerfileError('The Dockerfile has no FROM line.');
  return { text: `${lines.join('\n')}\n`, bases: [...layouts.keys()] };
}
