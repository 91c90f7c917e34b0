// Where tasks run: in the calling thread (workers = 0) or on a piscina pool of worker threads that
// share the network's SharedArrayBuffers.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { packageRoot } from '../util/package-root.js';
import { runPredict, runRehash, runTrain, runTrainGroup, runTrainSparse } from './kernels.js';
import { toWire } from './wire.js';
import type {
  PredictResult, PredictTask, RehashTask, RendezvousResult, RendezvousTask, SparseTrainResult, TrainGroupTask, TrainResult, TrainTask,
} from './tasks.js';

export interface Executor {
  /** Number of tasks that can usefully run at once. */
  readonly parallelism: number;
  /**
   * Tasks of any kind submitted and not yet settled. Checkpoints assert that it is 0 (a checkpoint
   * taken while a task updates the weights would not be the state of any batch count).
   */
  readonly inFlight: number;
  /**
   * Runs a train task. `signal` (worker pools only) cancels it: a task not yet started is dropped and a
   * running one has its worker thread terminated (piscina replaces the thread); the promise rejects at
   * once with an AbortError whose cause is the signal's reason. The inline executor runs tasks
   * synchronously and cannot be interrupted.
   */
  train(t: TrainTask, signal?: AbortSignal): Promise<TrainResult>;
  /**
   * Runs a group of consecutive batches as one task (see TrainGroupTask), with `signal` as for train().
   * Each batch's outcome is read from the group's `state` and `stats`, also when the promise rejects (the
   * batches before the failing one completed). Optional: fit() sends executors without it one batch per
   * train() call.
   */
  trainGroup?(t: TrainGroupTask, signal?: AbortSignal): Promise<void>;
  /** The slice's gradient rows (mode 3), weights untouched: data-parallel training (src/train/distributed.ts). */
  trainSparse(t: TrainTask): Promise<SparseTrainResult>;
  predict(t: PredictTask): Promise<PredictResult>;
  rehash(t: RehashTask): Promise<number>;
  close(): Promise<void>;
}

/** Runs every task synchronously in this thread. */
export class InlineExecutor implements Executor {
  readonly parallelism = 1;
  // Tasks run synchronously inside the call: nothing is ever in flight between calls.
  readonly inFlight = 0;
  async train(t: TrainTask, _signal?: AbortSignal) {
    return runTrain(t);
  }
  async trainGroup(t: TrainGroupTask, _signal?: AbortSignal) {
    runTrainGroup(t);
  }
  async trainSparse(t: TrainTask) {
    return runTrainSparse(t);
  }
  async predict(t: PredictTask) {
    return runPredict(t);
  }
  async rehash(t: RehashTask) {
    return runRehash(t);
  }
  async close() {}
}

/** The compiled worker module. Under vitest (TS sources) we still use the compiled copy in dist/. */
function workerFile(): string {
  const here = fileURLToPath(new URL('./worker.js', import.meta.url));
  if (existsSync(here)) return here;
  const built = join(packageRoot(), 'dist', 'src', 'network', 'worker.js');
  if (existsSync(built)) return built;
  throw new Error(`sublinear: worker module not found (${here}); run \`npm run build\``);
}

/** The worker module's export a pool thread loads when it starts (see the Piscina options below). */
export const PRELOADED_EXPORT = 'train';

/** Options of a worker pool. */
export interface PoolOptions {
  /**
   * Threads that share each exact prediction task (PredictTask.threads) that does not name its own: a
   * training run's intra-batch threads (FitOptions.threads), so that its held-out scoring and the
   * re-ranker's shortlists use the cores its batches use. Default 1.
   */
  predictThreads?: number;
}

/** A piscina pool of `workers` threads. */
export class PoolExecutor implements Executor {
  readonly parallelism: number;
  private pool: Piscina;
  private running = 0;
  private predictThreads: number;
  constructor(workers: number, opts: PoolOptions = {}) {
    this.parallelism = workers;
    this.predictThreads = Math.max(1, Math.min(256, Math.floor(opts.predictThreads ?? 1)));
    this.pool = new Piscina({
      filename: workerFile(),
      // Every task names its export; this name is only what piscina preloads when a thread starts. Left at
      // 'default' (which worker.ts does not export), piscina falls back to import() of the module it has
      // just require()d, and on Node 20.19-20.20 an import() racing the first task's require() of the same
      // ES module aborts the process ("v8::Module::IsGraphAsync must be used on an instantiated module").
      // Naming an export keeps every load on require().
      name: PRELOADED_EXPORT,
      minThreads: workers,
      maxThreads: workers,
      idleTimeout: 60_000,
      // Results are small; tasks are coarse. One queue slot per worker keeps dispatch latency low.
      concurrentTasksPerWorker: 1,
    });
  }
  get inFlight(): number {
    return this.running;
  }
  // Tasks go through toWire (src/network/wire.ts): views of 4 GiB or more would arrive truncated.
  train(t: TrainTask, signal?: AbortSignal): Promise<TrainResult> {
    return this.track(this.pool.run(toWire(t), signal ? { name: 'train', signal } : { name: 'train' }));
  }
  trainGroup(t: TrainGroupTask, signal?: AbortSignal): Promise<void> {
    return this.track(this.pool.run(toWire(t), signal ? { name: 'trainGroup', signal } : { name: 'trainGroup' }));
  }
  trainSparse(t: TrainTask): Promise<SparseTrainResult> {
    return this.track(this.pool.run(toWire(t), { name: 'trainSparse' }));
  }
  predict(t: PredictTask): Promise<PredictResult> {
    const task = t.threads === undefined && this.predictThreads > 1 ? { ...t, threads: this.predictThreads } : t;
    return this.track(this.pool.run(toWire(task), { name: 'predict' }));
  }
  rehash(t: RehashTask): Promise<number> {
    return this.track(this.pool.run(toWire(t), { name: 'rehash' }));
  }
  /**
   * Runs `parties` rendezvous tasks at once (see RendezvousTask): resolves with each task's result, all
   * `met` when the pool really runs that many tasks concurrently. Diagnostics and tests.
   */
  async rendezvous(parties: number, timeoutMs = 10_000): Promise<RendezvousResult[]> {
    const arrived = new Int32Array(new SharedArrayBuffer(4));
    const task: RendezvousTask = { arrived, parties, timeoutMs };
    return Promise.all(Array.from({ length: parties }, () => this.track(this.pool.run(task, { name: 'rendezvous' }) as Promise<RendezvousResult>)));
  }
  private track<T>(p: Promise<T>): Promise<T> {
    this.running++;
    return p.finally(() => void this.running--);
  }
  async close() {
    await this.pool.destroy();
  }
}

/** Default worker count: the machine's cores. */
export function defaultWorkers(): number {
  return availableParallelism();
}

export function createExecutor(workers: number, opts: PoolOptions = {}): Executor {
  if (!Number.isInteger(workers) || workers < 0) {
    throw new Error(`Expected non-negative integer for workers but received ${JSON.stringify(workers)}`);
  }
  return workers === 0 ? new InlineExecutor() : new PoolExecutor(workers, opts);
}
