// The result of a training job (train() and `sublinear train --json`): one schema in every mode (one
// process, data-parallel ranks, label-sharded ranks), documented in docs/cli.md. Each mode adds its own
// fields; the names older versions printed stay as aliases (marked below) for one minor version.
import type { Metrics } from '../network/metrics.js';
import type { CalibrationMetrics } from '../network/calibration.js';
import type { Network } from '../network/network.js';
import type { FitStats } from '../train/fit.js';
import { peakRssMB } from '../util/peak-rss.js';
import type { MemoryPlan } from '../network/memory-plan.js';
import type { EpochRecord } from './train-checkpoint.js';

/** How the job trained: one process, label-sharded ranks (--distributed), data-parallel ranks (--distributed --data-parallel). */
export type TrainMode = 'single' | 'replicated' | 'sharded';

/** The fields every mode reports, with the same meaning. */
export interface TrainReportCommon {
  mode: TrainMode;
  /** MPI ranks (1 in one process). */
  ranks: number;
  /** Test metrics (P@k, nDCG@k, PSP@k, ...) after training; null without test data or when a signal stopped the run. */
  metrics: Metrics | null;
  /** Epochs trained (the run's last epoch). */
  epochs: number;
  batchSize: number;
  /** Adam learning rate of the run. */
  lr: number;
  /** Samples trained by this run (not counting a resumed run's before its checkpoint). */
  samples: number;
  /** Training throughput, samples per second over the whole run. */
  samplesPerSec: number;
  /** Seconds of training (not reading, saving or testing). */
  trainSeconds: number;
  /** Worker threads per process. */
  workers: number;
  /** Peak resident memory of this process (rank 0's under MPI), MB. */
  peakRssMB: number;
  /** The saved model's absolute path, or null without `save`. */
  model: string | null;
  /** Checkpoints written (0 without `checkpoint`). */
  checkpoints: number;
  /** One entry per epoch: `epoch`, `loss`, `samplesPerSec` and the mode's own fields. */
  history: { epoch: number; loss: number; samplesPerSec: number }[];
  /**
   * Under MPI, what the ranks exchanged: `steps`, `bytesPerStep` (data-parallel: every rank's messages of a
   * step together; label-sharded: this rank's), `exchangeSeconds`, and the mode's own fields; null in one process.
   */
  exchange: ({ steps: number; bytesPerStep: number; exchangeSeconds: number } & Record<string, unknown>) | null;
  /** Under MPI, the comparisons of the replicated state across ranks (`checks`, `mismatches`); null in one process. */
  checksum: ({ checks: number; mismatches: number } & Record<string, unknown>) | null;
}

/** The fields every mode's report holds (docs/cli.md documents each; a test checks both). */
export const TRAIN_REPORT_FIELDS = [
  'mode', 'ranks', 'metrics', 'epochs', 'batchSize', 'lr', 'samples', 'samplesPerSec', 'trainSeconds', 'workers', 'peakRssMB',
  'model', 'checkpoints', 'history', 'exchange', 'checksum',
] as const satisfies readonly (keyof TrainReportCommon)[];

/** The report of a training job: the common fields, then the mode's (docs/cli.md lists them). */
export type TrainReport = TrainReportCommon & Record<string, unknown>;

/** What a run hands to trainReport. */
export interface TrainFacts {
  mode: TrainMode;
  ranks: number;
  metrics: Metrics | null;
  stats: FitStats;
  batchSize: number;
  lr: number;
  workers: number;
  model: string | null;
  /** Why `save` could not be written, when the model went to another file (`model` names it). */
  saveError?: string;
  signal: string | null;
  batchesDone: number;
  checkpoints: { written: number; failed: number } | null;
  logFailures: number | undefined;
  resumed: { file: string; batchesDone: number } | null;
  history: EpochRecord[];
  /** DistributedRun.summary: ranks, mpi, bytesPerStep, exchange, checksum. */
  distributed: Record<string, unknown> | null;
  /** Seconds per phase of the job (src/util/phases.ts), with `other` and `total`. */
  phases?: Record<string, number>;
  /** The memory plan the run was checked with. */
  memory?: MemoryPlan;
  /** A calibrated model's probability metrics on the test data (Network.evaluate's `calibration`). */
  testCalibration?: CalibrationMetrics;
}

/** The report of a run, in every mode. */
export function trainReport(f: TrainFacts): TrainReport {
  const s = f.stats;
  const d = f.distributed;
  const exchange = d?.['exchange'] as Record<string, unknown> | null | undefined;
  return {
    // Aliases: the test metrics at the top level, as before `metrics` (kept for one minor version).
    ...(f.metrics ?? {}),
    mode: f.mode,
    ranks: f.ranks,
    metrics: f.metrics,
    samplesPerSec: s.samplesPerSec,
    trainSeconds: s.trainSeconds,
    rebuildSeconds: s.rebuildSeconds,
    indexSeconds: s.indexSeconds,
    rebuilds: s.rebuilds,
    epochs: s.epochs,
    batchSize: f.batchSize,
    lr: f.lr,
    ...(s.bestEpoch !== undefined ? { bestEpoch: s.bestEpoch, validationPoints: s.validationPoints } : {}),
    ...(s.selection ? { selection: s.selection } : {}),
    ...(s.anneal ? { anneal: s.anneal } : {}),
    ...(s.blend ? { blend: s.blend } : {}),
    ...(s.rerank ? { rerank: s.rerank } : {}),
    ...(s.calibration ? { calibration: s.calibration } : {}),
    ...(f.testCalibration ? { testCalibration: f.testCalibration } : {}),
    ...(s.inputScaling ? { inputScaling: s.inputScaling } : {}),
    samples: s.samples,
    loss: s.lastLoss,
    workers: f.workers,
    peakRssMB: peakRssMB(),
    aborted: s.aborted,
    ...(s.stoppedIn ? { stoppedIn: s.stoppedIn } : {}),
    ...(f.signal ? { signal: f.signal } : {}),
    batchesDone: f.batchesDone,
    model: f.model,
    ...(f.saveError ? { saveError: f.saveError } : {}),
    lostBatches: s.lostBatches,
    checkpoints: f.checkpoints?.written ?? 0,
    ...(f.checkpoints ? { checkpointFailures: f.checkpoints.failed } : {}),
    ...(f.logFailures !== undefined ? { logFailures: f.logFailures } : {}),
    ...(f.resumed ? { resumedFrom: f.resumed.file, resumedAt: f.resumed.batchesDone } : {}),
    ...(d ?? {}),
    exchange: exchange ? { ...exchange, bytesPerStep: exchange['bytesPerStep'] as number } as TrainReportCommon['exchange'] : null,
    checksum: (d?.['checksum'] as TrainReportCommon['checksum'] | undefined) ?? null,
    ...(f.phases ? { phases: f.phases } : {}),
    ...(f.memory ? { memory: { parts: Object.fromEntries(f.memory.parts.map((p) => [p.name, p.bytes])), plannedBytes: f.memory.totalBytes } } : {}),
    history: f.history,
  };
}

/** What train() returns. */
export interface TrainResult {
  /**
   * The trained network; null on the ranks of an MPI job other than rank 0, and for a label-sharded job
   * that does not save (only saving gathers the whole model on rank 0).
   */
  network: Network | null;
  /** What `sublinear train --json` prints (docs/cli.md). */
  report: TrainReport;
  /** This process's rank of an MPI job (0 in one process): rank 0 reports for the job. */
  rank: number;
  /**
   * Set when the trained state was kept nowhere: no `save`, and the final checkpoint could not be written
   * (the CLI prints it and exits 1).
   */
  notSaved?: string;
  /**
   * Set when `save` could not be written at the end and the model was written to this file instead
   * (next to it, in the checkpoint directory or the temporary directory; the CLI exits 1).
   */
  savedInstead?: string;
}
