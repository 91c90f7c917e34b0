// Public entry point of the sublinear package.
export {
  Network, type PredictOptions, type EvaluateOptions, type Predictions, type LoadOptions, type SaveOptions, type NetworkOptions,
} from './network/network.js';
export { fit, resume, resumeInfo, type ResumeOptions, type ResumeInfo } from './train/fit-network.js';
export type { TrainingSummary } from './network/model-file.js';
export {
  defaultConfig, resolveConfig, ConfigError,
  type NetworkConfig, type LayerConfig, type SamplingConfig, type WideConfig, type HashName, type SelectionMode,
} from './network/config.js';
export type { ValidationOptions, ValidationPoint, SelectionReport, BlendReport, BlendTry } from './train/early-stop.js';
export { DivergedError, type FitOptions, type FitProgress, type FitStats, type CheckpointFailure } from './train/fit.js';
export type { RebuildScheduleOptions } from './network/schedule.js';
export {
  listCheckpoints, CheckpointFormatError, checkpointFileBytes,
  type CheckpointOptions, type CheckpointInfo, type CheckpointReason, type TrainingPosition, type SavedFitOptions,
  type SkippedCheckpoint,
} from './train/checkpoint.js';
export { MemoryLimitError } from './network/memory-plan.js';
export {
  planTraining, scanDataShape, datasetShape, shapeFromCounts, stepCost, shardedExchange, replicatedExchange, collectiveCost, rankMemory, workload, waitFactor,
  formatPlanLine, PLAN_SHAPES, type TrainingPlan, type PlanInput, type PlanCandidate, type PlanMode, type DataShape, type Calibration, type ShardCalibration, type MachineSpec,
  type StepCost, type Collective, type ExchangeInput, type Workload,
} from './train/plan.js';
export { calibrate, readCachedCalibration, writeCachedCalibration, defaultCalibrationFile, type CalibrateOptions } from './train/calibrate.js';
export { BinFileError } from './util/binfile.js';
export { modelFileBytes } from './network/model-file.js';
export { checkOutputDirs, OutputCheckError, type PlannedOutput } from './util/output-check.js';
export { lockDirectory, assertUnlocked, DirectoryLockedError, LOCK_FILE, type LockOwner, type DirectoryLock } from './train/lock.js';
export { computeMetrics, inversePropensity, labelFrequencies, type Metrics } from './network/metrics.js';
export { LshIndex, type LshIndexOptions, type LshQueryOptions, type LshQueryResult } from './lsh/index.js';
export {
  readXC, writeXC, readLibsvm, readText, parseTextLine, type TextData, type ReadTextOptions, readSplit, subset, synthesize, generateSynthetic, describe, DataFormatError,
  type SparseDataset,
} from './datasets/index.js';
export { TextVectorizer, type TextVectorizerOptions, type TextVectorizerMeta } from './text/vectorizer.js';
export { tokenize } from './text/tokenize.js';
export { LabelNames, labelledDataset, type LabelledText } from './text/labels.js';
export { readTextDatasets, type ReadTextDatasetsOptions, type TextDatasets } from './text/load.js';
export { native as loadNative } from './native/addon.js';
export { serve, PredictionServer, type ServeOptions, type ModelInfo } from './serve/server.js';
export { RequestError } from './serve/request.js';
export { createExecutor, type Executor } from './network/executor.js';
