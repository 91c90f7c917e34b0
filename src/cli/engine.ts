// What the engine's commands (train, eval, predict, demo, and plan and serve) share: the output streams,
// and how a job's reports are printed (src/job/events.ts): information lines and warnings on stderr,
// progress as a bar on a terminal or a line every few seconds elsewhere.
import type { JobEvents } from '../job/events.js';
import { Progress } from '../util/progress.js';

export type Out = { out: (s: string) => void; err: (s: string) => void; drain?: () => Promise<void> };

export type { InputFormat } from '../job/train-options.js';

/** A job's reports printed on `io`'s stderr (nothing when the job runs `quiet`). */
export function jobEvents(io: Out): Required<JobEvents> {
  return {
    onInfo: (line) => io.err(`${line}\n`),
    onWarning: (message) => io.err(`sublinear: warning: ${message}\n`),
    progress: (label, unit) => new Progress({ label, unit }),
  };
}

/** A predict/eval progress display over the points (quiet: none). */
export function pointsProgress(quiet: boolean, label: string): { bar: Progress | null; onProgress?: (done: number, total: number) => void } {
  const bar = quiet ? null : new Progress({ label, unit: 'points' });
  return { bar, onProgress: bar ? (done, total) => bar.update(done, total) : undefined };
}
