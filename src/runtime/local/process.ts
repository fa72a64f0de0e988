/**
 * What a machine runs, worked out from its image's config and its spec the way Docker
 * does it: argv from Entrypoint and Cmd (or the spec's `start` / `command`), the
 * environment from the image's Env with the spec's on top, the working directory, and the
 * signal that asks it to stop. Pure: the user lookup (users.ts) is done by the caller.
 */
import { constants } from 'node:os';
import type { ImageConfig } from '../images/index.js';
import type { MachineSpec } from '../runtime.js';

/** Docker's default PATH, for images that set none. */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Names the sandbox accepts; an image's Env entries with other names are dropped. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/** The process of a machine, ready for a SandboxSpec. */
export interface MachineProcess {
  argv: string[];
  env: Record<string, string>;
  /** Absolute path inside the machine. */
  cwd: string;
}

/**
 * The argv: `start` runs through the machine's own shell (the one place a shell string is
 * used, as the spec says), replacing Entrypoint and Cmd; `command` replaces Cmd only.
 * Empty when the image names nothing to run.
 */
export function machineArgv(
  spec: Pick<MachineSpec, 'start' | 'command'>,
  config: ImageConfig,
): string[] {
  if (spec.start !== undefined) return ['/bin/sh', '-c', spec.start];
  const entrypoint = config.entrypoint ?? [];
  return [...entrypoint, ...(spec.command ?? config.cmd ?? [])];
}

/**
 * The environment: the image's Env in order, overlaid by `env` (the app's secrets and
 * env, already merged by the service), then defaults for what is still missing: PATH,
 * HOME (the user's home from /etc/passwd, else `/`) and HOSTNAME, as Docker sets them.
 */
export function machineEnv(
  imageEnv: readonly string[],
  env: Record<string, string>,
  defaults: { home?: string; hostname: string },
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of imageEnv) {
    const eq = entry.indexOf('=');
    const name = eq < 0 ? entry : entry.slice(0, eq);
    if (ENV_NAME.test(name)) out[name] = eq < 0 ? '' : entry.slice(eq + 1);
  }
  Object.assign(out, env);
  out.PATH ??= DEFAULT_PATH;
  out.HOME ??= defaults.home ?? '/';
  out.HOSTNAME ??= defaults.hostname;
  return out;
}

/** The working directory: the image's WorkingDir (relative ones taken from `/`), else `/`. */
export function machineCwd(config: ImageConfig): string {
  const dir = config.workingDir?.trim();
  if (!dir) return '/';
  return dir.startsWith('/') ? dir : `/${dir}`;
}

/**
 * A signal name (`SIGTERM`, `TERM`, `15`, as STOPSIGNAL allows) as Node's name, or
 * undefined when it names no signal of this host.
 */
export function normalizeSignal(value: string | undefined): NodeJS.Signals | undefined {
  if (value === undefined) return undefined;
  const s = value.trim().toUpperCase();
  const table = constants.signals as Record<string, number>;
  if (/^\d+$/.test(s)) {
    const n = Number(s);
    return Object.keys(table).find((k) => table[k] === n) as NodeJS.Signals | undefined;
  }
  const name = s.startsWith('SIG') ? s : `SIG${s}`;
  return name in table ? (name as NodeJS.Signals) : undefined;
}

/** The signal of `stop`: the spec's killSignal, else the image's STOPSIGNAL, else SIGTERM. */
export function stopSignal(
  spec: Pick<MachineSpec, 'killSignal'>,
  config: ImageConfig,
): NodeJS.Signals {
  return normalizeSignal(spec.killSignal) ?? normalizeSignal(config.stopSignal) ?? 'SIGTERM';
}
