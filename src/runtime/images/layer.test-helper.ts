/**
 * Layer archives for tests, written entry by entry with node-tar's Header and Pax (for
 * long names), so a test can put anything in a layer: Debian's static busybox, whiteouts,
 * hard links, devices, or hostile names like `../escape`. build.test-helper.ts re-exports
 * all of it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Header, Pax } from 'tar';

/** One entry of a layer. `path` is written as given (no normalisation: tests need `../x`). */
export interface LayerEntry {
  path: string;
  /** Default `file` (or `dir` when the path ends with `/`). */
  type?: 'file' | 'dir' | 'symlink' | 'link' | 'char' | 'block' | 'fifo';
  content?: string | Buffer;
  /** Symlink target, or the path a hard link points to. */
  target?: string;
  mode?: number;
  uid?: number;
  gid?: number;
  mtime?: Date;
}

const TYPES = {
  file: 'File',
  dir: 'Directory',
  symlink: 'SymbolicLink',
  link: 'Link',
  char: 'CharacterDevice',
  block: 'BlockDevice',
  fifo: 'FIFO',
} as const;

export function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** An uncompressed tar archive of `entries`, in order. */
export function tarLayer(entries: LayerEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? (e.path.endsWith('/') ? 'dir' : 'file');
    const data = type === 'file' ? Buffer.from(e.content ?? '') : Buffer.alloc(0);
    const fields = {
      path: e.path,
      mode: e.mode ?? (type === 'dir' ? 0o755 : type === 'symlink' ? 0o777 : 0o644),
      uid: e.uid ?? 0,
      gid: e.gid ?? 0,
      size: data.length,
      mtime: e.mtime ?? new Date('2024-01-01T00:00:00Z'),
      type: TYPES[type],
      linkpath: e.target ?? '',
      uname: '',
      gname: '',
      devmaj: type === 'char' || type === 'block' ? 1 : 0,
      devmin: type === 'char' || type === 'block' ? 3 : 0,
    };
    const header = Buffer.alloc(512);
    if (new Header(fields).encode(header, 0)) {
      blocks.push(new Pax({ path: e.path, ...(e.target ? { linkpath: e.target } : {}) }).encode());
    }
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/**
 * A small Linux root: Debian's static busybox as /bin/busybox with applet symlinks, /etc
 * with passwd and group (root, nobody), /tmp (1777), and empty /proc, /dev, /sys, /root.
 */
export function busyboxLayer(
  applets = [
    'sh',
    'ls',
    'cat',
    'echo',
    'env',
    'id',
    'sleep',
    'httpd',
    'wget',
    'mkdir',
    'rm',
    'touch',
    'ps',
    'kill',
    'pwd',
    'true',
    'false',
  ],
): LayerEntry[] {
  const entries: LayerEntry[] = [
    { path: 'bin/', type: 'dir' },
    { path: 'bin/busybox', content: readFileSync('/bin/busybox'), mode: 0o755 },
    ...applets.map((a): LayerEntry => ({ path: `bin/${a}`, type: 'symlink', target: 'busybox' })),
    { path: 'etc/', type: 'dir' },
    {
      path: 'etc/passwd',
      content: 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n',
    },
    { path: 'etc/group', content: 'root:x:0:\nnogroup:x:65534:\n' },
    { path: 'tmp/', type: 'dir', mode: 0o1777 },
    { path: 'root/', type: 'dir', mode: 0o700 },
  ];
  for (const d of ['proc', 'dev', 'sys']) entries.push({ path: `${d}/`, type: 'dir' });
  return entries;
}
