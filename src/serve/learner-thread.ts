// The server's online learner on a thread of its own (POST /learn; docs/serving.md "Learning online"): an
// OnlineLearner (src/network/online.ts) runs in a worker thread (learner-worker.ts) at the lowest scheduling
// priority, on a Network built there over the served network's own SharedArrayBuffers. Its steps write the
// output rows and the wide part's weights in place, where the prediction threads read them; the requests
// never wait for it: the server's event loop only hands it the parsed examples and, when a call is done,
// takes the objects the learner replaced (a grown output layer, a rebuilt wide part), which a message
// carries without copying their shared arrays.
//
// Before this, the learner ran on the server's event loop, taking up to half of it in 2 ms slices, and its
// candidate predictions went through the server's prediction threads: at the 670k shape p99 latency while
// learning was 7 to 8 times idle; on its own thread, 1.0 to 1.3 times (docs/serving.md "Learning online").
import { Worker } from 'node:worker_threads';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { SparseDataset } from '../datasets/csr.js';
import { storedConfig, type NetworkConfig } from '../network/config.js';
import type { Network } from '../network/network.js';
import type { LearnReport, OnlineOptions } from '../network/online.js';
import type { ProbabilityCalibration } from '../network/calibration.js';
import type { RerankState } from '../network/rerank.js';
import type { InputMap } from '../network/input-map.js';
import type { LayerState, NetSpec, WideState } from '../native/network-types.js';
import { packageRoot } from '../util/package-root.js';

/** What the worker builds its network and learner from (workerData). */
export interface LearnerInit {
  config: NetworkConfig;
  spec: NetSpec;
  labelFreq: Uint32Array | null;
  trainPoints: number;
  batchesDone: number;
  rebuildRound: number;
  inputScale: Float32Array | null;
  inputLog: boolean;
  inputMap: InputMap | null;
  rerank: RerankState | null;
  calibration: ProbabilityCalibration | null;
  labelNames: readonly string[] | undefined;
  indexFresh: boolean;
  tablesFresh: boolean;
  options: OnlineOptions;
}

/** One learn call: labelled examples (CSR on shared memory), and every label's name after it (models with names). */
export interface LearnMessage {
  id: number;
  examples: SparseDataset;
  labelNames?: readonly string[];
}

/** What the learner replaced in a call, for the server's copy of the network to take. */
export interface LearnChanges {
  report: LearnReport;
  /** Labels were added: the grown output layer, and whether its cluster index is current. */
  grown?: { layer: LayerState; indexFresh: boolean };
  /** The wide part was rebuilt (new pairs for learned labels), the network not grown. */
  wide?: WideState;
}

export type LearnReply = ({ ok: true } & LearnChanges & { id: number }) | { ok: false; id: number; error: string };

/** The compiled worker module (under vitest, TS sources: the copy in dist/, as src/network/executor.ts does). */
function workerFile(): string {
  const here = fileURLToPath(new URL('./learner-worker.js', import.meta.url));
  if (existsSync(here)) return here;
  const built = join(packageRoot(), 'dist', 'src', 'serve', 'learner-worker.js');
  if (existsSync(built)) return built;
  throw new Error(`sublinear: learner worker module not found (${here}); run \`npm run build\``);
}

/**
 * An OnlineLearner of `net` on its own thread. Calls of learn() must not overlap (the server's writer queue
 * runs them one at a time), and nothing else may write the network meanwhile.
 */
export class LearnerThread {
  private next = 1;
  private readonly pending = new Map<number, { resolve: (c: LearnChanges) => void; reject: (e: Error) => void }>();
  private stopped: Error | null = null;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (m: LearnReply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) {
        const { ok: _, id: __, ...changes } = m;
        p.resolve(changes);
      } else {
        p.reject(new Error(m.error));
      }
    });
    const fail = (e: Error) => {
      this.stopped ??= e;
      for (const p of this.pending.values()) p.reject(this.stopped);
      this.pending.clear();
    };
    worker.on('error', (e) => fail(new Error(`the learner thread failed: ${e.message}`)));
    worker.on('exit', (code) => fail(new Error(`the learner thread stopped (exit code ${code})`)));
  }

  /** Starts the thread; resolves once its learner is built (rejects with the learner's refusal, e.g. bad options). */
  static async start(net: Network, options: OnlineOptions): Promise<LearnerThread> {
    const init: LearnerInit = {
      config: storedConfig(net.config), spec: net.spec, labelFreq: net.labelFreq, trainPoints: net.trainPoints,
      batchesDone: net.batchesDone, rebuildRound: net.rebuildRound, inputScale: net.inputScale, inputLog: net.inputLog, inputMap: net.inputMap, rerank: net.rerank,
      calibration: net.calibration, labelNames: net.labelNames, indexFresh: net.indexFresh, tablesFresh: net.tablesFresh, options,
    };
    const worker = new Worker(workerFile(), { workerData: init });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (m: { ready?: boolean; error?: string }) => {
        worker.off('exit', onExit);
        if (m.ready) resolve();
        else reject(new Error(m.error ?? 'the learner thread did not start'));
      };
      const onExit = (code: number) => {
        worker.off('message', onMessage);
        reject(new Error(`the learner thread stopped while starting (exit code ${code})`));
      };
      worker.once('message', onMessage);
      worker.once('exit', onExit);
    }).catch(async (e: unknown) => {
      await worker.terminate();
      throw e;
    });
    worker.unref();
    return new LearnerThread(worker);
  }

  /** Why the thread no longer learns (it failed, stopped or was closed); null while it runs. */
  get stoppedReason(): Error | null {
    return this.stopped;
  }

  /** Learns `examples` (OnlineLearner.learn); resolves with what the server's copy of the network must take. */
  learn(examples: SparseDataset, labelNames?: readonly string[]): Promise<LearnChanges> {
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const msg: LearnMessage = { id, examples, ...(labelNames ? { labelNames } : {}) };
      this.worker.postMessage(msg);
    });
  }

  /** Ends the thread (a call in progress is dropped: the server closes it after its writer queue). */
  async close(): Promise<void> {
    this.stopped ??= new Error('the learner thread was closed');
    await this.worker.terminate();
  }
}
