#!/usr/bin/env node
// The `sublinear` command line.
import { main } from './cli/main.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`sublinear: ${(err instanceof Error ? err.message : String(err)).replace(/^sublinear: /, '')}\n`);
    process.exitCode = 1;
  },
);
