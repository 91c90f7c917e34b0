// The micro-batcher's rule, with a predict function the test completes by hand: an idle batcher sends a
// request at once; requests that arrive while every slot is busy wait and leave together, whole, up to
// maxBatch points per call; each request gets its own rows, cut to its own k; a full queue refuses (429).
import { describe, expect, it } from 'vitest';
import { MicroBatcher, type BatchedRequest, type PredictBatch } from '../../src/serve/batcher.js';
import { RequestError } from '../../src/serve/request.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

/** A request of `points` rows for `model`; row r has the single feature `tag + r` (value 1). */
function req(points: number, tag: number, k = 2, mode: 'exact' | 'sampled' = 'exact', model: unknown = 'm'): BatchedRequest {
  const offsets = Uint32Array.from({ length: points + 1 }, (_, i) => i);
  return { fetch: k, mode, model, offsets, indices: Uint32Array.from({ length: points }, (_, r) => tag + r), values: new Float32Array(points).fill(1), points };
}

/** A predict function that records its calls and answers when the test says so: label j of a row = its feature id * 10 + j. */
function manual() {
  const calls: { data: SparseDataset; k: number; mode: string; model: unknown; finish: () => void }[] = [];
  const run: PredictBatch = (data, k, mode, model) => new Promise((resolve) => {
    calls.push({
      data, k, mode, model,
      finish: () => {
        const labels = new Uint32Array(data.points * k), scores = new Float32Array(data.points * k);
        for (let i = 0; i < data.points; i++) {
          for (let j = 0; j < k; j++) {
            labels[i * k + j] = data.indices[data.offsets[i]!]! * 10 + j;
            scores[i * k + j] = 1 / (j + 1);
          }
        }
        resolve({ labels, scores });
      },
    });
  });
  return { calls, run };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('MicroBatcher', () => {
  it('sends an idle request at once, then batches what waited, whole requests up to maxBatch points', async () => {
    const { calls, run } = manual();
    const b = new MicroBatcher(() => 1000, run, { maxBatch: 5, maxQueue: 100, concurrency: 1 });
    const first = b.submit(req(1, 100));
    expect(calls).toHaveLength(1); // no waiting for company
    const rest = [b.submit(req(2, 200)), b.submit(req(2, 300, 3)), b.submit(req(2, 400)), b.submit(req(1, 500))];
    expect(b.stats()).toMatchObject({ queued: 7, inFlight: 1 });
    calls[0]!.finish();
    await first;
    await tick();
    // 2 + 2 = 4 points, and the next request (2) would exceed maxBatch 5: it waits for the next call.
    expect(calls).toHaveLength(2);
    expect(calls[1]!.data.points).toBe(4);
    expect(calls[1]!.k).toBe(3); // the largest k of the batch
    expect(Array.from(calls[1]!.data.offsets)).toEqual([0, 1, 2, 3, 4]);
    expect(Array.from(calls[1]!.data.indices)).toEqual([200, 201, 300, 301]);
    calls[1]!.finish();
    await tick();
    expect(calls).toHaveLength(3);
    expect(calls[2]!.data.points).toBe(3);
    calls[2]!.finish();
    const answers = await Promise.all(rest);
    expect(answers[0]).toEqual([{ labels: [2000, 2001], scores: [1, 0.5] }, { labels: [2010, 2011], scores: [1, 0.5] }]);
    expect(answers[1]![1]).toEqual({ labels: [3010, 3011, 3012], scores: [1, 0.5, Math.fround(1 / 3)] });
    expect(answers[3]).toEqual([{ labels: [5000, 5001], scores: [1, 0.5] }]);
    expect(b.stats()).toEqual({ queued: 0, inFlight: 0, batches: 3, points: 8, rejected: 0 });
  });

  it('keeps modes apart, oldest first, and runs up to `concurrency` calls at once', async () => {
    const { calls, run } = manual();
    const b = new MicroBatcher(() => 1000, run, { maxBatch: 64, maxQueue: 100, concurrency: 2 });
    const p = [b.submit(req(1, 1)), b.submit(req(1, 2)), b.submit(req(1, 3, 2, 'sampled')), b.submit(req(1, 4)), b.submit(req(1, 5, 2, 'sampled'))];
    expect(calls.map((c) => [c.mode, c.data.points])).toEqual([['exact', 1], ['exact', 1]]);
    calls[0]!.finish();
    await tick();
    // The oldest waiting request is the sampled one: its queue goes next, with everything in it.
    expect(calls.map((c) => [c.mode, c.data.points])).toEqual([['exact', 1], ['exact', 1], ['sampled', 2]]);
    calls[1]!.finish();
    await tick();
    expect(calls[3]!.mode).toBe('exact');
    calls[2]!.finish();
    calls[3]!.finish();
    expect((await Promise.all(p)).map((a) => a[0]!.labels[0])).toEqual([10, 20, 30, 40, 50]);
  });

  it('refuses a request that would overfill the queue with 429, and passes a failed call to its requests', async () => {
    const { calls, run } = manual();
    const b = new MicroBatcher(() => 1000, run, { maxBatch: 8, maxQueue: 4, concurrency: 1 });
    const a = b.submit(req(3, 10));
    const c = b.submit(req(4, 20)); // waits: 4 queued
    let err: unknown;
    try {
      b.submit(req(1, 30));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RequestError);
    expect((err as RequestError).status).toBe(429);
    expect((err as Error).message).toBe('the server is busy (4 points queued, at most 4): retry later');
    expect(b.stats().rejected).toBe(1);
    calls[0]!.finish();
    await a;
    await tick();
    const failing = new MicroBatcher(() => 1000, () => Promise.reject(new Error('native failure')), { maxBatch: 8, maxQueue: 8, concurrency: 1 });
    await expect(failing.submit(req(1, 1))).rejects.toThrow('native failure');
    calls[1]!.finish();
    expect((await c)).toHaveLength(4);
  });

  it('batches only requests for the same model (a reload or a growth swaps it), each call with its model', async () => {
    const { calls, run } = manual();
    const b = new MicroBatcher(() => 1000, run, { maxBatch: 64, maxQueue: 100, concurrency: 1 });
    const p = [b.submit(req(1, 1, 2, 'exact', 'old')), b.submit(req(1, 2, 2, 'exact', 'old')), b.submit(req(1, 3, 2, 'exact', 'new')), b.submit(req(1, 4, 2, 'exact', 'new'))];
    calls[0]!.finish();
    await tick();
    expect(calls.map((c) => [c.model, c.data.points])).toEqual([['old', 1], ['old', 1]]);
    calls[1]!.finish();
    await tick();
    expect(calls.map((c) => [c.model, c.data.points])).toEqual([['old', 1], ['old', 1], ['new', 2]]);
    calls[2]!.finish();
    expect((await Promise.all(p)).map((a) => a[0]!.labels[0])).toEqual([10, 20, 30, 40]);
  });
});
