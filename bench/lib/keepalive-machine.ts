/**
 * A machine image whose server is not the bottleneck of a proxy benchmark. busybox httpd
 * forks per connection and closes it after each answer (~150 req/s here, p99 in seconds),
 * and so does Go's `pebble-challtestsrv`. This image runs the host's own `node` (with the
 * libraries it links) and a one-line server that keeps connections alive and answers
 * PAGE for any path on INTERNAL_PORT.
 */
import { readFileSync } from 'node:fs';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { INTERNAL_PORT, PAGE, type MachinePier } from './machine-pier.js';

const LIBS = [
  'libdl.so.2',
  'libstdc++.so.6',
  'libm.so.6',
  'libgcc_s.so.1',
  'libpthread.so.0',
  'libc.so.6',
];
const SERVER = `require('node:http').createServer((q, s) => s.end(${JSON.stringify(PAGE.content)})).listen(${INTERNAL_PORT});`;
const hostFile = (file: string, at = file.slice(1)) => ({
  path: at,
  content: readFileSync(file),
  mode: 0o755,
});

/** Pushes the keep-alive image to the bench's registry; answers its reference. */
export const keepAliveImage = (b: MachinePier) =>
  b.pushImage('keepalive:1', {
    layers: [
      busyboxLayer(),
      [
        { path: 'lib/', type: 'dir' },
        { path: 'lib/x86_64-linux-gnu/', type: 'dir' },
        { path: 'lib64/', type: 'dir' },
        ...LIBS.map((l) => hostFile(`/lib/x86_64-linux-gnu/${l}`)),
        hostFile('/lib64/ld-linux-x86-64.so.2'),
        hostFile(process.execPath, 'bin/node'),
        { path: 'srv/', type: 'dir' },
        { path: 'srv/server.js', content: SERVER },
      ],
    ],
    config: { Cmd: ['/bin/node', '/srv/server.js'] },
  });
