/**
 * The image config blob (OCI image config / Docker container image v1): what a machine
 * needs to start the image (entrypoint, cmd, env, working dir, user, stop signal, ports)
 * and the layers' uncompressed digests (`rootfs.diff_ids`), which the unpacker verifies.
 */
import { z } from 'zod';
import { ImageError } from './errors.js';

/** How to run an image, as its author configured it. */
export interface ImageConfig {
  entrypoint?: string[];
  cmd?: string[];
  /** `NAME=value` strings, in the image's order. */
  env: string[];
  workingDir?: string;
  user?: string;
  stopSignal?: string;
  /** Port numbers of `ExposedPorts` (tcp and udp alike), sorted and without duplicates. */
  exposedPorts?: number[];
}

const strings = z.array(z.string()).nullish();
const schema = z.object({
  architecture: z.string().optional(),
  os: z.string().optional(),
  variant: z.string().optional(),
  config: z
    .object({
      Entrypoint: strings,
      Cmd: strings,
      Env: strings,
      WorkingDir: z.string().nullish(),
      User: z.string().nullish(),
      StopSignal: z.string().nullish(),
      ExposedPorts: z.record(z.string(), z.unknown()).nullish(),
    })
    .nullish(),
  rootfs: z.object({
    type: z.literal('layers'),
    diff_ids: z.array(z.string().regex(/^sha256:[a-f0-9]{64}$/)),
  }),
});

/** A parsed config blob. */
export interface ParsedConfig {
  config: ImageConfig;
  diffIds: string[];
  os?: string;
  architecture?: string;
}

/** Parses a config blob; malformed → `unsupported`. */
export function parseImageConfig(bytes: Buffer, what: string): ParsedConfig {
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new ImageError('unsupported', `The config of ${what} is not JSON.`);
  }
  const r = schema.safeParse(json);
  if (!r.success) throw new ImageError('unsupported', `The config of ${what} is malformed.`);
  const c = r.data.config ?? {};
  const config: ImageConfig = { env: c.Env ?? [] };
  if (c.Entrypoint?.length) config.entrypoint = c.Entrypoint;
  if (c.Cmd?.length) config.cmd = c.Cmd;
  if (c.WorkingDir) config.workingDir = c.WorkingDir;
  if (c.User) config.user = c.User;
  if (c.StopSignal) config.stopSignal = c.StopSignal;
  if (c.ExposedPorts) {
    const ports = Object.keys(c.ExposedPorts)
      .map((k) => Number(/^(\d{1,5})(?:\/\w+)?$/.exec(k)?.[1]))
      .filter((p) => Number.isInteger(p) && p >= 1 && p <= 65535);
    if (ports.length) config.exposedPorts = [...new Set(ports)].sort((a, b) => a - b);
  }
  return {
    config,
    diffIds: r.data.rootfs.diff_ids,
    ...(r.data.os ? { os: r.data.os } : {}),
    ...(r.data.architecture ? { architecture: r.data.architecture } : {}),
  };
}
