#!/usr/bin/env -S node --max-semi-space-size=2
// The `pier` binary: runs the compiled CLI (built by `npm ci` through the `prepare` script).
// The flag on the first line keeps V8's young generation small (2 MiB semi-spaces instead
// of 16): `pier serve` is a long-lived control plane whose memory with 100 idle machines
// is a goal (bench/machines-many), and its allocations are short-lived and few. The
// machines bench reads the flags from that line, so it measures pier as it runs.
import '../dist/cli/entry.js';
