// Micro-batching: requests wait in a bounded queue (one per mode) and leave it in batches, one native
// predict call per batch, with at most `concurrency` batches in flight (one per worker thread). Nothing
// waits for a timer: an idle server sends a request on at once as a batch of one; under load, the requests
// that arrived while the workers were busy form the next batch. So batches grow with the load, and the
// latency at low load is one predict call.
import { sharedFloat32, sharedUint32, type SparseDataset } from '../datasets/csr.js';
import { RequestError, type ParsedRequest } from './request.js';

/** Top-k of one point: label ids and softmax scores, best first (and the calibrated probabilities of a calibrated model). */
export interface PointPrediction {
  labels: number[];
  scores: number[];
  probabilities?: number[];
}

/**
 * Runs one batch with `model` (the one its requests were parsed for: BatchedRequest.model): `data` has no
 * labels; returns (points, k) ids (0xFFFFFFFF: none), scores and, for a calibrated model, probabilities.
 */
export type PredictBatch = (
  data: SparseDataset, k: number, mode: 'exact' | 'sampled', model: unknown,
) => Promise<{ labels: Uint32Array; scores: Float32Array; probabilities?: Float32Array }>;

/** A request as the batcher takes it: its points, `fetch` labels per point, and the model it is for. */
export interface BatchedRequest extends Pick<ParsedRequest, 'mode' | 'offsets' | 'indices' | 'values' | 'points'> {
  /** Labels per point to return. */
  fetch: number;
  /** Requests are batched only with requests for the same model (a reload or a growth swaps it). */
  model: unknown;
}

interface Pending {
  req: BatchedRequest;
  /** Arrival order across both queues. */
  seq: number;
  resolve: (r: PointPrediction[]) => void;
  reject: (e: unknown) => void;
}

export interface BatcherOptions {
  /** Points per batch: requests are added to a batch until it holds at least this many. */
  maxBatch: number;
  /** Points that may wait in the queues (in flight not counted); a request that would exceed it gets 429. */
  maxQueue: number;
  /** Batches in flight at once. */
  concurrency: number;
}

/** Counters for `GET /health` and the benchmark. */
export interface BatcherStats {
  /** Points waiting in the queues. */
  queued: number;
  /** Batches running. */
  inFlight: number;
  /** Batches sent and points predicted since the start. */
  batches: number;
  points: number;
  /** Requests refused because the queue was full. */
  rejected: number;
}

export class MicroBatcher {
  private readonly queues: Record<'exact' | 'sampled', Pending[]> = { exact: [], sampled: [] };
  private queued = 0;
  private inFlight = 0;
  private batches = 0;
  private points = 0;
  private rejected = 0;
  private seq = 0;
  private idleWaiters: (() => void)[] = [];

  /** Called with the points of every batch predicted (the server's batch-size histogram). */
  onBatch: ((points: number) => void) | undefined;

  /** `features`: the input dimension of the rows the batches hold (read at every batch: a reload may change it). */
  constructor(private readonly features: () => number, private readonly run: PredictBatch, private readonly opts: BatcherOptions) {}

  /** Queues a request; resolves with its points' predictions. Throws RequestError(429) when the queue is full. */
  submit(req: BatchedRequest): Promise<PointPrediction[]> {
    if (this.queued + req.points > this.opts.maxQueue) {
      this.rejected++;
      throw new RequestError(429, `the server is busy (${this.queued} points queued, at most ${this.opts.maxQueue}): retry later`);
    }
    return new Promise((resolve, reject) => {
      this.queues[req.mode].push({ req, seq: this.seq++, resolve, reject });
      this.queued += req.points;
      this.pump();
    });
  }

  stats(): BatcherStats {
    return { queued: this.queued, inFlight: this.inFlight, batches: this.batches, points: this.points, rejected: this.rejected };
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this.queued === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private pump(): void {
    while (this.inFlight < this.opts.concurrency) {
      // The mode whose oldest request has waited longest goes first (each queue is FIFO).
      const e = this.queues.exact, s = this.queues.sampled;
      const q = e.length === 0 ? s : s.length === 0 ? e : e[0]!.seq < s[0]!.seq ? e : s;
      if (q.length === 0) break;
      let n = 0;
      let take = 0;
      const model = q[0]!.req.model;
      while (take < q.length && (take === 0 || (n + q[take]!.req.points <= this.opts.maxBatch && q[take]!.req.model === model))) n += q[take++]!.req.points;
      const group = q.splice(0, take);
      this.queued -= n;
      this.inFlight++;
      this.batches++;
      void this.runGroup(group, n).finally(() => {
        this.inFlight--;
        this.points += n;
        this.pump();
        if (this.queued === 0 && this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
      });
    }
  }

  /** One predict call for the group's points (concatenated CSR rows); each request gets its slice. */
  private async runGroup(group: Pending[], points: number): Promise<void> {
    try {
      let nnz = 0, k = 1;
      for (const g of group) {
        nnz += g.req.indices.length;
        k = Math.max(k, g.req.fetch);
      }
      const offsets = sharedUint32(points + 1), indices = sharedUint32(nnz), values = sharedFloat32(nnz);
      let row = 0, p = 0;
      for (const g of group) {
        indices.set(g.req.indices, p);
        values.set(g.req.values, p);
        for (let i = 1; i <= g.req.points; i++) offsets[row + i] = p + g.req.offsets[i]!;
        row += g.req.points;
        p += g.req.indices.length;
      }
      const data: SparseDataset = {
        points, features: this.features(), labels: 0, offsets, indices, values,
        labelOffsets: sharedUint32(points + 1), labelIndices: sharedUint32(0),
      };
      const out = await this.run(data, k, group[0]!.req.mode, group[0]!.req.model);
      this.onBatch?.(points);
      row = 0;
      for (const g of group) {
        const preds: PointPrediction[] = [];
        for (let i = 0; i < g.req.points; i++, row++) {
          const labels: number[] = [], scores: number[] = [];
          const probabilities: number[] | undefined = out.probabilities ? [] : undefined;
          for (let j = 0; j < g.req.fetch; j++) {
            const id = out.labels[row * k + j]!;
            if (id === 0xffffffff) break;
            labels.push(id);
            scores.push(out.scores[row * k + j]!);
            probabilities?.push(out.probabilities![row * k + j]!);
          }
          preds.push(probabilities ? { labels, scores, probabilities } : { labels, scores });
        }
        g.resolve(preds);
      }
    } catch (e) {
      for (const g of group) g.reject(e);
    }
  }
}
