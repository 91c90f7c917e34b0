// Public entry point of the sublinear package.
export {
  Network, type PredictOptions, type EvaluateOptions, type Predictions, type ResumeOptions, type ResumeInfo, type LoadOptions,
} from './network/network.js';
export {
  defaultConfig, resolveConfig, ConfigError,
  type NetworkConfig, type LayerConfig, type SamplingConfig, type HashName, type SelectionMode,
} from './network/config.js';
export { DivergedError, type FitOptions, type FitProgress, type FitStats } from './train/fit.js';
export type { RebuildScheduleOptions } from './train/schedule.js';
export {
  listCheckpoints, CheckpointFormatError,
  type CheckpointOptions, type CheckpointInfo, type CheckpointReason, type TrainingPosition, type SavedFitOptions,
  type SkippedCheckpoint,
} from './train/checkpoint.js';
export { MemoryLimitError } from './train/memory-plan.js';
export { computeMetrics, inversePropensity, labelFrequencies, type Metrics } from './train/metrics.js';
export { LshIndex, type LshIndexOptions, type LshQueryOptions, type LshQueryResult } from './lsh/index.js';
export {
  readXC, writeXC, readLibsvm, readSplit, subset, synthesize, generateSynthetic, describe, DataFormatError,
  type SparseDataset,
} from '../datasets/index.js';
export { native as loadNative } from './native.js';
