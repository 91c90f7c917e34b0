#!/usr/bin/env node
// The `sublinear` command line.
import { main } from './cli/main.js';
import { fsErrorReason } from './util/fs-errors.js';

// A reader that stops early (`sublinear predict ... | head -1`) closes the pipe: that is the normal end
// of a pipeline, not an error. Exit quietly with 0, as cat and grep do, instead of a stack trace.
// Any other failed write (`predict > /dev/full`, a full disk, a file too large) loses output: say so and
// exit 1 at once (what was computed cannot be delivered; a lock a command holds is released at exit).
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  process.stderr.write(`sublinear: cannot write to standard output: ${fsErrorReason(err)}; the output is incomplete\n`);
  process.exit(1);
});
// stderr carries progress and messages, not results: a closed stderr (`train ... 2>&1 | head -1`) must not
// end a training run before it saves its model. Further messages are dropped.
process.stderr.on('error', () => {});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`sublinear: ${(err instanceof Error ? err.message : String(err)).replace(/^sublinear: /, '')}\n`);
    process.exitCode = 1;
  },
);
