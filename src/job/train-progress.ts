// The progress line of `sublinear train` for a run whose length held-out validation decides: the epoch
// cap (50 by default) is no estimate of when such a run ends, so the line says what is known instead.
import type { FitProgress } from '../train/fit.js';
import { formatDuration } from '../util/progress.js';

/** The early-stopping state the line shows: 1-based epochs (0: none yet). */
export interface EarlyStopView {
  /** The epoch with the best held-out score so far. */
  best: number;
  /** Epochs without a new best before training stops (validation.patience). */
  patience: number;
}

/**
 * "epoch 11 (at most 50): 40%, 12s left; best so far epoch 8, ends after epoch 11 (in about 12s) unless
 * the held-out score improves": the epoch in progress, the time left in it, and the earliest end (no new
 * best: epoch best + patience, capped), timed at the mean speed so far. `samplesPerEpoch`: points per
 * epoch (batches per epoch x batch size).
 */
export function earlyStopProgressText(p: FitProgress, e: EarlyStopView, samplesPerEpoch: number): string {
  const pct = Math.floor((100 * p.batch) / p.batchesPerEpoch);
  const head = `epoch ${p.epoch + 1} (at most ${p.epochs}): ${pct}%, ${formatDuration(p.epochEtaSeconds)} left`;
  if (e.best <= 0) return head;
  const end = Math.max(p.epoch + 1, Math.min(p.epochs, e.best + e.patience));
  const toEnd = p.epochEtaSeconds + ((end - (p.epoch + 1)) * samplesPerEpoch) / Math.max(p.samplesPerSec, 1e-9);
  return `${head}; best so far epoch ${e.best}, ends after epoch ${end} (in about ${formatDuration(toEnd)}) unless the held-out score improves`;
}
