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
//   task has finished, then max(60 s, 100 x the median batch time so far)) is treated as failed: its
//   worker thread is terminated (piscina's AbortSignal; a new thread replaces it) and the rules above
//   apply. Node can only terminate a thread while it runs JavaScript: a thread stuck inside native code
//   is abandoned (its task rejected) and goes away when it returns to JavaScript or the process exits.
// - When training is stopped (Ctrl-C, FitOptions.signal), tasks in flight get a grace of max(5 s, 10 x
//   the median batch time x the task's batches not yet done) and are then terminated the same way; such
//   a task is not retried (the run is stopping) and its unfinished batches count as lost.
//
// The inline executor (workers: 0) runs tasks synchronously in the calling thread: no timeout can
// interrupt them there.
//
// Groups (runGroup): consecutive batches sent as one task (TrainGroupTask), so that one worker is not left
// idle by a hand-off per batch. The rules above hold batch by batch: each batch of a group has its own
// state cell, the batches before a failure are done, the failing batch is retried or lost as above, and
// the batches after it (not started) are sent again as a new group, in order, behind the failing batch's
// retry; no batch runs before the batches ahead of it have completed, failed or been given up. A group's
// timeout counts from its start or from its last completed batch (timeoutMs is per batch).
import type { Executor } from '../network/executor.js';
import { GROUP_STATS, type TrainBatch, type TrainGroupTask, type TrainResult, type TrainTask } from '../network/tasks.js';

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
  /** Batches of the task not yet done (for the stop grace). */
  batches: () => number;
}

/** A task cancelled by its timeout or by the stop grace. */
class TaskCancelled extends Error {
  override name = 'TaskCancelled';
}

export class BatchRunner {
  /** Durations (ms) per batch of recent successful tasks, for the adaptive timeout. */
  private durations: number[] = [];
  private recorded = 0;
  private medianMs = NaN;
  private running = new Set<Running>();
  private stopping = false;
  /**
   * Milliseconds a batch's train call took inside the worker: the median over the last group that completed
   * batches, NaN before one did. Unlike the task times it leaves out the hand-off and a new thread's start,
   * so it sizes the groups (fit's GROUP_MS) from the work alone.
   */
  batchMs = NaN;
  /** Tasks sent to the executor so far (a group counts once; a retry counts again). */
  tasksSent = 0;

  constructor(private exec: Executor, private opts: BatchRunnerOptions = {}) {
    const t = opts.taskTimeout;
    if (t !== undefined && !(typeof t === 'number' && t > 0 && Number.isFinite(t))) {
      throw new Error(`Expected positive number of seconds for taskTimeout but received ${JSON.stringify(t)}`);
    }
  }

  /** The timeout given to a task (or to each batch of a group) starting now, in milliseconds. */
  timeoutMs(): number {
    if (this.opts.taskTimeout !== undefined) return this.opts.taskTimeout * 1000;
    return Number.isFinite(this.medianMs) ? Math.max(60_000, 100 * this.medianMs) : 600_000;
  }

  /** Median duration (ms) of a batch in recent tasks, NaN before the first one finished. */
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
   * Runs `tasks` (consecutive batches sharing everything but their TrainBatch fields) in order as groups on
   * exec.trainGroup. Returns one outcome per task, in order; it ends early, after the outcome of a batch
   * that `failed`, without running the batches after it.
   */
  async runGroup(tasks: TrainTask[]): Promise<TaskOutcome[]> {
    const out: TaskOutcome[] = [];
    const attempts = new Array<number>(tasks.length).fill(0);
    const firsts = new Array<string>(tasks.length).fill('');
    while (out.length < tasks.length) {
      const from = out.length;
      const n = tasks.length - from;
      const { pointIds: _p, lr: _l, gradScale: _g, seed: _s, wideLr: _w, fault: _f, attempt: _a, progress: _r, ...base } = tasks[from]!;
      const batches: TrainBatch[] = tasks.slice(from).map((t, i) => ({
        pointIds: t.pointIds, lr: t.lr, gradScale: t.gradScale, seed: t.seed, attempt: attempts[from + i]!,
        ...(t.wideLr !== undefined ? { wideLr: t.wideLr } : {}),
        ...(t.fault !== undefined ? { fault: t.fault } : {}),
      }));
      const g: TrainGroupTask = {
        base, batches, state: new Int32Array(new SharedArrayBuffer(4 * n)), stats: new Float64Array(new SharedArrayBuffer(8 * GROUP_STATS * n)),
      };
      let why = '';
      try {
        await this.attemptGroup(g);
      } catch (e) {
        why = (e as Error).message;
      }
      // The batches that completed, then (after a failure) the one that failed.
      let i = 0;
      const ms: number[] = [];
      for (const st = g.stats; i < n && Atomics.load(g.state, i) === 3; i++) {
        const at = GROUP_STATS * i;
        out.push({ ok: { lossSum: st[at]!, samples: st[at + 1]!, activeSum: st[at + 2]!, missedLabels: st[at + 3]! } });
        ms.push(st[at + 4]!);
      }
      if (ms.length) this.batchMs = ms.sort((a, b) => a - b)[ms.length >> 1]!;
      if (i === n) break;
      if (!why) why = 'the task ended before its batch completed'; // not expected: a group runs all or throws
      const at = from + i;
      const state = Atomics.load(g.state, i);
      if (state !== 0) {
        out.push({ lost: `${why}, after its task had started updating the weights: not retried (part or all of its update may be applied)` });
      } else if (this.stopping) {
        out.push({ lost: `${why}; not retried because training is stopping (the batch was not applied)` });
      } else if (attempts[at] === 1) {
        out.push({ failed: `${why} (first: ${firsts[at]})` });
        return out;
      } else {
        attempts[at] = 1;
        firsts[at] = why;
      }
      // Training is stopping: the batches not started are not started now.
      if (this.stopping) {
        while (out.length < tasks.length) out.push({ lost: 'not started because training is stopping (the batch was not applied)' });
      }
    }
    return out;
  }

  /**
   * Training is stopping (Ctrl-C): tasks in flight get max(5 s, 10 x the median batch time x their
   * batches not yet done) more (never more than their own timeout), then are terminated; no task is
   * retried from now on.
   */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const r of this.running) this.applyGrace(r);
  }

  private applyGrace(r: Running): void {
    const grace = Math.max(5000, 10 * r.batches() * (Number.isFinite(this.medianMs) ? this.medianMs : 0));
    const now = performance.now();
    if (r.deadline - now <= grace) return;
    clearTimeout(r.timer);
    r.deadline = now + grace;
    r.timer = setTimeout(() => r.ac.abort(new TaskCancelled(`no result ${(grace / 1000).toFixed(1)} s after training was asked to stop (its worker thread was terminated)`)), grace);
  }

  private attempt(task: TrainTask): Promise<TrainResult> {
    return this.guarded((signal) => this.exec.train(task, signal), 1, () => 0);
  }

  /** attempt() for a group: the timeout restarts whenever one of its batches completes. */
  private attemptGroup(g: TrainGroupTask): Promise<void> {
    const exec = this.exec;
    if (!exec.trainGroup) throw new Error('BatchRunner.runGroup: the executor runs no groups (Executor.trainGroup)');
    const n = g.batches.length;
    return this.guarded((signal) => exec.trainGroup!(g, signal), n, () => {
      let k = 0;
      while (k < n && Atomics.load(g.state, k) === 3) k++;
      return k;
    });
  }

  /**
   * Runs `call` (a task of `n` batches, `completed()` of them done so far) under the timeout, restarted
   * whenever `completed()` grew since it was set, and under the stop grace; records its time per batch.
   */
  private async guarded<T>(call: (signal: AbortSignal) => Promise<T>, n: number, completed: () => number): Promise<T> {
    const ms = this.timeoutMs();
    const ac = new AbortController();
    let seen = 0;
    const watch = () => {
      const k = completed();
      // A batch completed since the timer was set: it is not hung (under a stop, the grace's timer rules).
      if (k > seen && !this.stopping) {
        seen = k;
        r.deadline = performance.now() + ms;
        r.timer = setTimeout(watch, ms);
        return;
      }
      ac.abort(new TaskCancelled(`timed out: no result after ${(ms / 1000).toFixed(1)} s (its worker thread was terminated)`));
    };
    const r: Running = { ac, deadline: performance.now() + ms, timer: setTimeout(watch, ms), batches: () => n - completed() };
    this.running.add(r);
    if (this.stopping) this.applyGrace(r);
    this.tasksSent++;
    const t0 = performance.now();
    try {
      const result = await call(ac.signal);
      this.record((performance.now() - t0) / n);
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
