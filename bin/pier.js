#!/usr/bin/env node
// The `pier` binary: runs the compiled CLI (built by `npm ci` through the `prepare` script).
import '../dist/cli/entry.js';
