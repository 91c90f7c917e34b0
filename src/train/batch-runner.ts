// Runs the train tasks of the fit loop with the failure policy that keeps "exactly once" true of the
// weights, not only of the accounting:
//
// - A task that fails before it touched the weights (its `progress` cell still 0: it threw before the
//   update, its thread died or hung before it, or it never started) changed nothing: it is retried once,
//   on whichever worker is free. A second failure stops training (the caller's error).
// - A task that fails after it started updating the weights (`progress` 1 or 2: the kernel sets it right
//   before and after netTrainSlice) may have applied part or all of its batch. Running it again would
//   apply (part of) the batch twice, silently, and there is no undo for HOGWILD updates that other
//   workers have already built on. So it is NOT retried: the batch is recorded as lost (FitStats
//   .lostBatches, a warning through FitOptions.onWarning) and training goes on; a resumed or repeated
//   run then differs from an uninterrupted one, and the warning says so. Too many lost batches (see
//   maxLostBatches) stop training.
// - A task with no result after its timeout (FitOptions.taskTimeout; default: 10 minutes until a first
//   task has finished, then max(60 s, 100 x the median task time so far)) is treated as failed: its
//   worker thread is terminated (piscina's AbortSignal; a new thread replaces it) and the rules above
//   apply. Node can only terminate a thread while it runs JavaScript: a thread stuck inside native code
//   is abandoned (its task rejected) and goes away when it returns to JavaScript or the process exits.
// - When training is stopped (Ctrl-C, FitOptions.signal), tasks in flight get a grace of max(5 s, 10 x
//   the median task time) and are then terminated the same way; such a task is not retried (the run is
//   stopping) and its batch counts as lost.
//
// The inline executor (workers: 0) runs tasks synchronously in the calling thread: no timeout can
// interrupt them there.
import type { Executor } from '../network/executor.js';
import type { TrainResult, TrainTask } from '../network/tasks.js';

/** What running one task (with its retry) came to. */
export type TaskOutcome =
  | { ok: TrainResult }
  /** Not retried: the task may have applied part or all of its update (or was cancelled at a stop). */
  | { lost: string }
  /** Failed twice before touching the weights. */
  | { failed: string };

export interface BatchRunnerOptions {
  /** Seconds; see FitOptions.taskTimeout. Undefined: the adaptive default. */
  taskTimeout?: number;
}

/** Most lost batches tolerated in one fit() before training stops: max(3, 0.1% of its batches). */
export function maxLostBatches(totalBatches: number): number {
  return Math.max(3, Math.ceil(totalBatches / 1000));
}

interface Running {
  ac: AbortController;
  timer: ReturnType<typeof setTimeout>;
  deadline: number;
}

/** A task cancelled by its timeout or by the stop grace. */
class TaskCancelled extends Error {
  override name = 'TaskCancelled';
}

export class BatchRunner {
  /** Durations (ms) of recent successful tasks, for the adaptive timeout. */
  private durations: number[] = [];
  private recorded = 0;
  private medianMs = NaN;
  private running = new Set<Running>();
  private stopping = false;

  constructor(private exec: Executor, private opts: BatchRunnerOptions = {}) {
    const t = opts.taskTimeout;
    if (t !== undefined && !(typeof t === 'number' && t > 0 && Number.isFinite(t))) {
      throw new Error(`Expected positive number of seconds for taskTimeout but received ${JSON.stringify(t)}`);
    }
  }

  /** The timeout given to a task starting now, in milliseconds. */
  timeoutMs(): number {
    if (this.opts.taskTimeout !== undefined) return this.opts.taskTimeout * 1000;
    return Number.isFinite(this.medianMs) ? Math.max(60_000, 100 * this.medianMs) : 600_000;
  }

  /** Median duration (ms) of recent tasks, NaN before the first one finished. */
  get medianTaskMs(): number {
    return this.medianMs;
  }

  /** Runs `task` (attempt 0, and attempt 1 when the first failed before touching the weights). */
  async run(task: TrainTask): Promise<TaskOutcome> {
    let first = '';
    for (let attempt = 0; attempt < 2; attempt++) {
      const progress = new Int32Array(new SharedArrayBuffer(4));
      try {
        return { ok: await this.attempt({ ...task, attempt, progress }) };
      } catch (e) {
        const why = (e as Error).message;
        const state = Atomics.load(progress, 0);
        if (state !== 0) {
          return { lost: `${why}, after its task had started updating the weights: not retried (part or all of its update may be applied)` };
        }
        if (this.stopping) return { lost: `${why}; not retried because training is stopping (the batch was not applied)` };
        if (attempt === 1) return { failed: `${why} (first: ${first})` };
        first = why;
      }
    }
    throw new Error('unreachable');
  }

  /**
   * Training is stopping (Ctrl-C): tasks in flight get max(5 s, 10 x the median task time) more (never
   * more than their own timeout), then are terminated; no task is retried from now on.
   */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const r of this.running) this.applyGrace(r);
  }

  private applyGrace(r: Running): void {
    const grace = Math.max(5000, 10 * (Number.isFinite(this.medianMs) ? this.medianMs : 0));
    const now = performance.now();
    if (r.deadline - now <= grace) return;
    clearTimeout(r.timer);
    r.deadline = now + grace;
    r.timer = setTimeout(() => r.ac.abort(new TaskCancelled(`no result ${(grace / 1000).toFixed(1)} s after training was asked to stop (its worker thread was terminated)`)), grace);
  }

  private async attempt(task: TrainTask): Promise<TrainResult> {
    const ms = this.timeoutMs();
    const ac = new AbortController();
    const r: Running = {
      ac,
      deadline: performance.now() + ms,
      timer: setTimeout(() => ac.abort(new TaskCancelled(`timed out: no result after ${(ms / 1000).toFixed(1)} s (its worker thread was terminated)`)), ms),
    };
    this.running.add(r);
    if (this.stopping) this.applyGrace(r);
    const t0 = performance.now();
    try {
      const result = await this.exec.train(task, ac.signal);
      this.record(performance.now() - t0);
      return result;
    } catch (e) {
      // piscina rejects an aborted task with an AbortError that carries the reason.
      if (ac.signal.aborted && ac.signal.reason instanceof TaskCancelled) throw ac.signal.reason;
      throw e;
    } finally {
      clearTimeout(r.timer);
      this.running.delete(r);
    }
  }

  private record(ms: number): void {
    const d = this.durations;
    if (d.length >= 255) d.shift();
    d.push(ms);
    // The median moves slowly: refresh it every 16 tasks (and at the first).
    if (this.recorded++ % 16 === 0) {
      const s = d.slice().sort((a, b) => a - b);
      this.medianMs = s[s.length >> 1]!;
    }
  }
}
