/**
 * `app_source_upload`: how an agent gives pier code. The sources route takes raw bytes (a
 * gzip'd tar), which a tool call's JSON cannot carry as they are; so this tool takes
 * either `files` (relative path -> UTF-8 text) or `archiveBase64` (a gzip'd tar, for
 * binaries and file modes) and turns it into that body. The call then runs as
 * `POST /v1/apps/:name/sources` like any other tool (route-call.ts): the route's auth
 * row, agent judge, audit, archive checks (paths, links, devices) and size caps apply
 * unchanged. The bounds here only keep one tool call small; the route's caps still rule.
 */
import { gzipSync } from 'node:zlib';
import { Header, Pax } from 'tar';
import { z } from 'zod';
import type { RawBody, ToolRoute } from './tool-route.js';

/** Files one call may carry, and their total size in bytes (UTF-8). */
export const UPLOAD_FILES_MAX = 2000;
export const UPLOAD_BYTES_MAX = 8 * 1024 * 1024;

/** A path inside the tree: relative, `/`-separated, no `.`/`..`/empty segment. */
const filePath = z
  .string()
  .min(1)
  .max(1024)
  .refine(
    (p) =>
      !p.startsWith('/') &&
      !p.includes('\0') &&
      p.split('/').every((s) => s !== '' && s !== '.' && s !== '..'),
    { message: 'must be a relative path inside the tree (no leading "/", "." or "..")' },
  );

const input = z
  .object({
    app: z.string().min(1).max(63).describe('The app’s name.'),
    files: z
      .record(filePath, z.string())
      .optional()
      .describe(
        `The tree as relative path -> UTF-8 text content (files 0644; directories implied); at most ${UPLOAD_FILES_MAX} files, ${UPLOAD_BYTES_MAX / 1024 / 1024} MiB in all.`,
      ),
    archiveBase64: z
      .base64()
      .max(Math.ceil(UPLOAD_BYTES_MAX / 3) * 4)
      .optional()
      .describe('Instead of files: the tree as a gzip’d tar, in base64.'),
  })
  .superRefine((v, ctx) => {
    if ((v.files === undefined) === (v.archiveBase64 === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['files'], message: 'give files or archiveBase64' });
    }
    if (v.files === undefined) return;
    const paths = Object.keys(v.files);
    if (paths.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['files'], message: 'no files' });
    }
    if (paths.length > UPLOAD_FILES_MAX) {
      ctx.addIssue({
        code: 'custom',
        path: ['files'],
        message: `more than ${UPLOAD_FILES_MAX} files`,
      });
    }
    const bytes = Object.values(v.files).reduce((n, text) => n + Buffer.byteLength(text), 0);
    if (bytes > UPLOAD_BYTES_MAX) {
      ctx.addIssue({
        code: 'custom',
        path: ['files'],
        message: `more than ${UPLOAD_BYTES_MAX} bytes in all`,
      });
    }
  });

// A fixed time: the same files make the same archive (and the same source sha256).
const MTIME = new Date('2000-01-01T00:00:00Z');

function entry(path: string, type: 'File' | 'Directory', data: Buffer): Buffer[] {
  const header = Buffer.alloc(512);
  const needsPax = new Header({
    path,
    type,
    mode: type === 'File' ? 0o644 : 0o755,
    size: data.length,
    mtime: MTIME,
    uid: 0,
    gid: 0,
  }).encode(header, 0);
  const pad = Buffer.alloc((512 - (data.length % 512)) % 512);
  // A path past ustar's fields goes in a pax header before the entry.
  return [...(needsPax ? [new Pax({ path }).encode()] : []), header, data, pad];
}

/** A gzip'd tar of `files`, each parent directory before its files, in a stable order. */
export function filesArchive(files: Record<string, string>): Buffer {
  const paths = Object.keys(files).sort();
  const dirs = new Set<string>();
  for (const p of paths) {
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join('/'));
  }
  const blocks: Buffer[] = [];
  for (const d of [...dirs].sort()) blocks.push(...entry(`${d}/`, 'Directory', Buffer.alloc(0)));
  for (const p of paths) blocks.push(...entry(p, 'File', Buffer.from(files[p]!, 'utf8')));
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

function uploadBody(value: Record<string, unknown>): RawBody {
  const v = value as z.infer<typeof input>;
  const bytes = v.files ? filesArchive(v.files) : Buffer.from(v.archiveBase64 ?? '', 'base64');
  return { contentType: 'application/gzip', bytes };
}

export const SOURCE_UPLOAD_TOOL: ToolRoute = {
  name: 'app_source_upload',
  description:
    'Upload a source tree for an app, as files (path -> text) or a base64 gzip’d tar; answers the source (its id is what app_detect and app_build take).',
  route: 'POST /v1/apps/:name/sources',
  params: { name: 'app' },
  input,
  rawBody: uploadBody,
};
