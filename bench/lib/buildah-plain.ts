/**
 * The baseline of `deploy-dockerfile`: the same Dockerfile and context built by hand with
 * Debian's `buildah bud`, with the storage driver and cache flags pier's builder uses
 * (`src/runtime/builds/buildah.ts`: vfs, `--layers`, `--pull-never`), from the base image
 * as a local OCI layout (`FROM oci:<dir>`), which is how pier hands base images to its
 * builder. None of pier's isolation (network namespace, user namespace, seccomp, cgroup)
 * is there: the Dockerfile has no RUN step, so they would cost little anyway.
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildImage, type ImageSpec } from '../../src/runtime/images/build.test-helper.js';

/** Writes `spec` as an OCI image layout at `dir` (oci-layout, index.json, blobs). */
export async function writeOciLayout(dir: string, spec: ImageSpec): Promise<void> {
  const built = buildImage(spec);
  const blobs = path.join(dir, 'blobs', 'sha256');
  await mkdir(blobs, { recursive: true });
  const put = (digest: string, bytes: Buffer) =>
    writeFile(path.join(blobs, digest.replace(/^sha256:/, '')), bytes);
  for (const [digest, bytes] of built.blobs) await put(digest, bytes);
  await put(built.top.digest, built.top.body);
  await writeFile(path.join(dir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  const index = {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [
      { mediaType: built.top.mediaType, digest: built.top.digest, size: built.top.body.length },
    ],
  };
  await writeFile(path.join(dir, 'index.json'), JSON.stringify(index));
}

/** `buildah bud` of `context` (its `Dockerfile`) into storage under `storageDir`, tagged `tag`. */
export function buildahBud(storageDir: string, context: string, tag: string): Promise<void> {
  const args = [
    '--storage-driver',
    'vfs',
    '--root',
    path.join(storageDir, 'root'),
    '--runroot',
    path.join(storageDir, 'runroot'),
    'bud',
    // A RUN step needs no network here, and buildah's default one would add firewall
    // rules of netavark's to the host.
    '--network',
    'none',
    '--pull-never',
    '--layers',
    '-f',
    path.join(context, 'Dockerfile'),
    '-t',
    tag,
    context,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn('buildah', args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root', TMPDIR: storageDir },
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`buildah bud exited ${code}:\n${out.slice(-2000)}`)),
    );
  });
}
