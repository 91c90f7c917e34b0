// The progress line of a training run whose length held-out validation decides (src/job/train-progress.ts):
// the epoch cap is not presented as the plan.
import { describe, expect, it } from 'vitest';
import { earlyStopProgressText } from '../../src/job/train-progress.js';
import type { FitProgress } from '../../src/train/fit.js';

const p = (o: Partial<FitProgress>): FitProgress => ({
  epoch: 10, epochs: 50, epochsIsLimit: true, batch: 40, batchesPerEpoch: 100, samples: 0, loss: 1, samplesPerSec: 1000,
  etaSeconds: 4000, epochEtaSeconds: 12, avgActive: 0, labelMissRate: 0, ...o,
});

describe('earlyStopProgressText', () => {
  it('shows the epoch in progress and the time left in it, not a share of the cap', () => {
    expect(earlyStopProgressText(p({ epoch: 0, batch: 0, epochEtaSeconds: 7.4 }), { best: 0, patience: 3 }, 12800)).toBe('epoch 1 (at most 50): 0%, 7s left');
  });

  it('names the best epoch and the earliest end, timed at the speed so far', () => {
    // Epoch 11 in progress, best 8, patience 3: without a new best, training ends after epoch 11, in 12 s.
    expect(earlyStopProgressText(p({}), { best: 8, patience: 3 }, 12800))
      .toBe('epoch 11 (at most 50): 40%, 12s left; best so far epoch 8, ends after epoch 11 (in about 12s) unless the held-out score improves');
    // Best 10: two more epochs of 12,800 samples at 1,000 samples/s after this one.
    expect(earlyStopProgressText(p({}), { best: 10, patience: 3 }, 12800))
      .toBe('epoch 11 (at most 50): 40%, 12s left; best so far epoch 10, ends after epoch 13 (in about 38s) unless the held-out score improves');
    // Never past the cap.
    expect(earlyStopProgressText(p({ epoch: 48 }), { best: 49, patience: 3 }, 12800))
      .toBe('epoch 49 (at most 50): 40%, 12s left; best so far epoch 49, ends after epoch 50 (in about 25s) unless the held-out score improves');
  });
});
