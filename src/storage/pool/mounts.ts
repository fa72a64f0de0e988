/**
 * What is mounted where, read from /proc/self/mountinfo: the pool looks there on start to
 * take back a mount that outlived the previous process instead of mounting a second time.
 */
import { readFile } from 'node:fs/promises';

/** One line of mountinfo, the fields the pool needs. */
export interface MountEntry {
  mountPoint: string;
  fsType: string;
  source: string;
}

/** mountinfo escapes space, tab, newline and backslash as three octal digits. */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Parses mountinfo text (see proc(5)): optional fields end at a lone "-". */
export function parseMountInfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-', 6);
    const mountPoint = fields[4];
    const fsType = fields[dash + 1];
    const source = fields[dash + 2];
    if (dash < 0 || mountPoint === undefined || fsType === undefined || source === undefined) {
      continue;
    }
    out.push({ mountPoint: unescape(mountPoint), fsType, source: unescape(source) });
  }
  return out;
}

/** The mounts of this process's namespace, in mount order. */
export async function readMounts(): Promise<MountEntry[]> {
  return parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8'));
}

/** Mounts stacked on `mountPoint` (an absolute, resolved path), topmost last. */
export async function mountsAt(mountPoint: string): Promise<MountEntry[]> {
  return (await readMounts()).filter((m) => m.mountPoint === mountPoint);
}
