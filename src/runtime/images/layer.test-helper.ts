/**
 * Layer archives for tests, written entry by entry with node-tar's Header and Pax (for
 * long names), so a test can put anything in a layer: Debian's static busybox, whiteouts,
 * hard links, devices, or hostile names like `../escape`. build.test-helper.ts re-exports
 * all of it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
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

/** The applets `busyboxLayer` links by default. */
export const DEFAULT_APPLETS: readonly string[] = [
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
];

/**
 * A small Linux root: Debian's static busybox as /bin/busybox with applet symlinks, /etc
 * with passwd and group (root, nobody), /tmp (1777), and empty /proc, /dev, /sys, /root.
 */
export function busyboxLayer(applets = DEFAULT_APPLETS): LayerEntry[] {
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

/** Layer bytes with their diff id already known (for layers too big to inflate twice). */
export interface PrebuiltLayer {
  bytes: Buffer;
  diffId: string;
}

/**
 * A tar bomb: a gzip layer holding one file of `size` zero bytes (what a sparse file of
 * that apparent size becomes in a tar), about a thousandth of it compressed. Built as
 * concatenated gzip members (one member of 1 MiB of zeros, repeated), so neither the
 * inflated tar nor a slow compression of it is ever needed.
 */
export function zeroFileLayer(name: string, size: number): PrebuiltLayer {
  const MIB = 1024 * 1024;
  const header = Buffer.alloc(512);
  new Header({
    path: name,
    mode: 0o644,
    uid: 0,
    gid: 0,
    size,
    mtime: new Date('2024-01-01T00:00:00Z'),
    type: 'File',
    uname: '',
    gname: '',
  }).encode(header, 0);
  const zeros = Buffer.alloc(MIB);
  const zerosGz = gzipSync(zeros);
  const rest = Buffer.alloc(size % MIB);
  const trailer = Buffer.alloc(((512 - (size % 512)) % 512) + 1024);
  const hash = createHash('sha256').update(header);
  const members = [gzipSync(header)];
  for (let i = 0; i < Math.floor(size / MIB); i++) {
    hash.update(zeros);
    members.push(zerosGz);
  }
  hash.update(rest).update(trailer);
  members.push(gzipSync(Buffer.concat([rest, trailer])));
  return { bytes: Buffer.concat(members), diffId: `sha256:${hash.digest('hex')}` };
}
