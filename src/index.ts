// The public entry point of the sublinear package: a deliberate, small set of names, each a promise kept
// across versions (test/index.test.ts lists them: an addition is reviewed there). Everything else is
// internal: reachable by the package's own modules and tests through their paths, not from 'sublinear'.
//
//   jobs       train, evaluate, plan: what `sublinear train`, `eval` and `plan` do, one call each
//   the model  Network (load, predict, evaluate, explain, grow, save), defaultConfig, serve, OnlineLearner (what
//              the server's POST /learn runs), LshIndex
//   data       readXC, writeXC, readLibsvm, readText, readSplit, subset, synthesize
//   errors     UsageError, ConfigError, DataFormatError, BinFileError, MemoryLimitError, OutputCheckError,
//              DivergedError, CheckpointFormatError, DirectoryLockedError, RequestError

// Jobs.
export { train, type TrainJob, type TrainReport, type TrainResult } from './job/train.js';
export type { TrainReportCommon, TrainMode } from './job/train-report.js';
export type { InputFormat } from './job/train-options.js';
export { evaluate, type EvalJob, type EvalReport, type EvalResult } from './job/evaluate.js';
export { plan, type PlanJob, type PlanResult } from './job/plan.js';
export type { JobEvents, ProgressSink } from './job/events.js';
export type { ConfigFileTraining } from './job/config-file.js';
export type { TrainingPlan, PlanCandidate, PlanMode, DataShape } from './train/plan.js';
export type { FitStats, FitProgress } from './train/fit.js';
export type { ValidationOptions, SelectionReport, BlendReport } from './train/early-stop.js';
export type { RebuildScheduleOptions } from './network/schedule.js';

// The model.
export {
  Network, type PredictOptions, type PredictMode, type EvaluateOptions, type Predictions, type LoadOptions, type SaveOptions, type NetworkOptions,
} from './network/network.js';
export type { ProbabilityCalibration, CalibrationOptions, CalibrationReport, CalibrationMetrics } from './network/calibration.js';
export type { LabelExplanation, FeatureContribution } from './network/explain.js';
export { OnlineLearner, type OnlineOptions, type LearnReport } from './network/online.js';
export {
  defaultConfig, type NetworkConfig, type LayerConfig, type SamplingConfig, type WideConfig, type RerankConfig, type HashName, type SelectionMode,
} from './network/config.js';
export type { Metrics } from './network/metrics.js';
export type { TrainingSummary } from './network/model-file.js';
export { serve, type ServeOptions, type ModelInfo, type PredictionServer } from './serve/server.js';
export { LshIndex, type LshIndexOptions, type LshQueryOptions, type LshQueryResult } from './lsh/index.js';

// Data.
export { readXC, type ReadXCOptions } from './datasets/xc-reader.js';
export { writeXC, type WriteXCOptions } from './datasets/xc-writer.js';
export { readLibsvm, type ReadLibsvmOptions } from './datasets/libsvm-reader.js';
export { readText, type ReadTextOptions, type TextData } from './datasets/text-reader.js';
export { readSplit, subset, type ReadSplitOptions } from './datasets/split-reader.js';
export { synthesize, type SynthesizeOptions, type ShapeName } from './datasets/synth.js';
export type { SparseDataset } from './datasets/csr.js';
export type { TextVectorizer } from './text/vectorizer.js';

// Errors.
export { UsageError } from './util/usage-error.js';
export { ConfigError } from './network/config.js';
export { DataFormatError } from './datasets/errors.js';
export { BinFileError } from './util/binfile.js';
export { MemoryLimitError } from './network/memory-plan.js';
export { OutputCheckError } from './util/output-check.js';
export { DivergedError } from './train/fit.js';
export { CheckpointFormatError } from './train/checkpoint.js';
export { DirectoryLockedError } from './train/lock.js';
export { RequestError } from './serve/request.js';
