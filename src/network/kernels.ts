// Runs tasks by calling the native kernels directly. Used in-process (workers: 0) and, unchanged,
// inside each piscina worker, so one worker computes exactly what the serial engine computes.
import { threadId } from 'node:worker_threads';
import { addonFile, native } from '../native/addon.js';
import { GROUP_STATS } from './tasks.js';
import type {
  InjectedFault, PredictResult, PredictTask, RehashTask, RendezvousResult, RendezvousTask, SparseTrainResult, TrainGroupTask, TrainResult, TrainTask,
} from './tasks.js';

/** Runs an injected fault (tests) if one is set for this point and attempt. */
function injectFault(t: TrainTask, at: InjectedFault['at']): void {
  const f = t.fault;
  const attempt = t.attempt ?? 0;
  if (!f || f.at !== at || attempt >= f.belowAttempt) return;
  if (f.kind === 'exit') process.exit(70); // in a worker thread: ends this thread only
  if (f.kind === 'hang') {
    // Blocks, but stays interruptible by Worker.terminate (which stops Atomics.wait).
    const cell = new Int32Array(new SharedArrayBuffer(4));
    Atomics.wait(cell, 0, 0, 600_000);
  }
  throw new Error(`injected failure ${at === 'before-update' ? 'before' : 'after'} the update (attempt ${attempt})`);
}

export function runTrain(t: TrainTask): TrainResult {
  injectFault(t, 'before-update');
  const stats = new Float64Array(4);
  if (t.progress) Atomics.store(t.progress, 0, 1);
  try {
    native().netTrainSlice(
      t.net,
      t.data,
      t.pointIds,
      {
        mode: 0, lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, gradScale: t.gradScale, seed: t.seed >>> 0,
        ...(t.threads !== undefined ? { threads: t.threads } : {}),
        ...(t.wideLr !== undefined ? { wideLr: t.wideLr } : {}),
      },
      stats,
    );
  } catch (e) {
    // The kernel throws only from its checks of the inputs and of the hash tables, which all run before
    // its first weight write (native/net_train.cc: check_slice, then the forward pass with its table
    // queries, then the updates): a thrown call changed nothing and may be retried.
    if (t.progress) Atomics.store(t.progress, 0, 0);
    throw e;
  }
  if (t.progress) Atomics.store(t.progress, 0, 2);
  injectFault(t, 'after-update');
  return { lossSum: stats[0]!, samples: stats[1]!, activeSum: stats[2]!, missedLabels: stats[3]! };
}

/**
 * Runs a group's batches in order (see TrainGroupTask), recording each one's state and result as it goes;
 * the first failure ends the task (the batches after it are left at state 0: not started).
 */
export function runTrainGroup(g: TrainGroupTask): void {
  for (let i = 0; i < g.batches.length; i++) {
    const t0 = performance.now();
    const r = runTrain({ ...g.base, ...g.batches[i]!, progress: g.state.subarray(i, i + 1) });
    const at = GROUP_STATS * i;
    g.stats[at] = r.lossSum;
    g.stats[at + 1] = r.samples;
    g.stats[at + 2] = r.activeSum;
    g.stats[at + 3] = r.missedLabels;
    g.stats[at + 4] = performance.now() - t0;
    Atomics.store(g.state, i, 3);
  }
}

/** Mode 3: the gradient rows of the rows the slice touched; the weights are left alone (src/train/distributed.ts). */
export function runTrainSparse(t: TrainTask): SparseTrainResult {
  injectFault(t, 'before-update'); // mode 3 updates nothing: every failure comes before an update
  const stats = new Float64Array(4);
  const grads = native().netTrainSlice(
    t.net,
    t.data,
    t.pointIds,
    {
      mode: 3, lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, gradScale: t.gradScale, seed: t.seed >>> 0,
      ...(t.fillSeed !== undefined ? { fillSeed: t.fillSeed >>> 0 } : {}),
    },
    stats,
  )!;
  return { lossSum: stats[0]!, samples: stats[1]!, activeSum: stats[2]!, missedLabels: stats[3]!, grads };
}

export function runPredict(t: PredictTask): PredictResult {
  const n = t.pointIds.length;
  const S = t.scales?.length ?? 1;
  const idx = new Uint32Array(n * S * t.k);
  const val = new Float32Array(n * S * t.k);
  const scored = native().netPredictSlice(t.net, t.data, t.pointIds, t.k, t.sampled ? 1 : 0, idx, val, t.scales, t.threads);
  return { idx, val, scored };
}

export function runRehash(t: RehashTask): number {
  const layer = t.net.layers[t.layer]!;
  const s = layer.sampling;
  if (!s) throw new Error(`layer ${t.layer} is not sampled`);
  const start = performance.now();
  native().lshRehash(s.hash, s.tables, layer.weights, t.t0, t.t1, t.seed);
  return (performance.now() - start) / 1000;
}

/** See RendezvousTask. */
export function runRendezvous(t: RendezvousTask): RendezvousResult {
  Atomics.add(t.arrived, 0, 1);
  Atomics.notify(t.arrived, 0);
  const end = performance.now() + t.timeoutMs;
  for (;;) {
    const n = Atomics.load(t.arrived, 0);
    if (n >= t.parties) return { met: true, threadId, addon: addonFile() };
    const left = end - performance.now();
    if (left <= 0) return { met: false, threadId, addon: addonFile() };
    Atomics.wait(t.arrived, 0, n, left);
  }
}
