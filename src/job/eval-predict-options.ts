// The options of an evaluation (evaluate(job), `sublinear eval`) and of a prediction (`sublinear predict`),
// and the --k parser: shared by the one-process jobs and their label-sharded MPI variants.
import { UsageError } from '../util/usage-error.js';
import type { JobEvents } from './events.js';
import type { InputFormat } from './train-options.js';
import type { PredictMode } from '../network/network.js';

export interface EvalJob extends JobEvents {
  model: string;
  test: string;
  /** Default: text for a model trained on text, else xc. */
  format?: InputFormat;
  /** LIBSVM feature ids start at 0 (files are 1-based by default). Default false. */
  zeroBased?: boolean;
  /** No progress and no information lines. Default false. */
  quiet?: boolean;
  workers?: number;
  mode?: PredictMode;
  candidates?: number;
  propensityA?: number;
  propensityB?: number;
  /** Cut-offs of P@k, nDCG@k, PSP@k, e.g. '1,3,5,10'. Default '1,3,5'. */
  k?: string;
  /**
   * A calibrated model (Network.calibration): the probability threshold of the reported micro- and
   * macro-F1, or 'model' (the one chosen in training). Default 'model'.
   */
  threshold?: number | 'model';
  /** Refuse a model or data needing more bytes (default: 90% of the machine's memory). */
  maxMemory?: number;
  /**
   * Evaluate label-sharded as one rank of an MPI job: `model` is the --checkpoint directory of
   * `train --distributed` (src/job/evaluate.ts). Default false.
   */
  distributed?: boolean;
}

/** Parses `--threshold t|model`: a probability in (0, 1], or 'model' (the model's own). */
export function parseThreshold(text: string | undefined): number | 'model' | undefined {
  if (text === undefined || text === 'model') return text;
  const t = Number(text);
  if (!(text.trim() !== '' && t > 0 && t <= 1)) throw new UsageError(`option --threshold expects a score in (0, 1] or 'model' but received ${text.length > 40 ? `${text.slice(0, 37)}...` : text}`);
  return t;
}

/** Parses `--k 1,3,5`: distinct positive integers, at most `max`, in increasing order. */
export function parseKs(text: string, max: number): number[] {
  const parts = text.split(',').map((x) => x.trim());
  const ks = parts.map(Number);
  if (!parts.length || parts.some((p, i) => !/^\d+$/.test(p) || !(ks[i]! >= 1))) {
    throw new UsageError(`option --k expects positive integers separated by commas, e.g. 1,3,5, but received '${text.length > 60 ? `${text.slice(0, 57)}...` : text}'`);
  }
  const over = ks.find((k) => k > max);
  if (over !== undefined) throw new UsageError(`option --k ${over} exceeds the model's ${max} labels`);
  return [...new Set(ks)].sort((a, b) => a - b);
}

/**
 * The labels per point predict prints: `k` as given (refused above the model's `outputs` labels), else
 * with `threshold` (of the softmax scores: a model without calibration) as many as can reach it (softmax
 * scores sum to 1: at most floor(1/t) labels reach t, one more for rounding), else 5; a default is cut to a smaller model's labels.
 */
export function predictK(o: { k?: number; threshold?: number }, outputs: number): number {
  if (o.threshold !== undefined && !(o.threshold > 0 && o.threshold <= 1)) throw new UsageError(`option --threshold expects a score in (0, 1] but received ${o.threshold}`);
  if (o.k !== undefined && o.k > outputs) throw new UsageError(`option --k ${o.k} exceeds the model's ${outputs} labels`);
  return o.k ?? Math.min(outputs, o.threshold !== undefined ? Math.floor(1 / o.threshold) + 1 : 5);
}

export interface PredictJob {
  model: string;
  /** A data file, or '-' for standard input. */
  input: string;
  /** Format of the input. Default: text for a model trained on text, else xc. */
  inputFormat?: InputFormat;
  /** LIBSVM feature ids start at 0 (files are 1-based by default). Default false. */
  zeroBased?: boolean;
  /**
   * What is printed: 'xc' (a sparse score matrix of label ids, with a header) or 'jsonl'. Default: jsonl
   * (with label names) for a model with label names, else xc.
   */
  format?: 'xc' | 'jsonl';
  /** Labels per point (at most). Default 5 (the model's labels if fewer); with `threshold`, every label above it. */
  k?: number;
  /**
   * Print only the labels whose probability is at least this, in (0, 1], or 'model': the threshold chosen
   * in training. A calibrated model (trained with validation) compares its calibrated probabilities, among
   * each point's candidates (PredictOptions.threshold); a model without calibration compares its softmax
   * scores, which sum to 1, so that at most 1/t labels pass (napkinXC's threshold prediction).
   * Default none (top-k).
   */
  threshold?: number | 'model';
  /** jsonl: explain each label by the `explain` input features of largest contribution (Network.explain). Default none. */
  explain?: number;
  workers?: number;
  mode?: PredictMode;
  candidates?: number;
  quiet?: boolean;
  /** Refuse a model or data needing more bytes (default: 90% of the machine's memory). */
  maxMemory?: number;
  /**
   * Predict label-sharded as one rank of an MPI job: `model` is the --checkpoint directory of
   * `train --distributed`; rank 0 writes (src/cli/predict-sharded.ts). Default false.
   */
  distributed?: boolean;
}
