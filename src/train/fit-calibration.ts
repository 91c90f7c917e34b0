// Where the training procedure (src/train/fit-network.ts) fits the calibrated probabilities
// (src/network/calibration.ts): on points that the weights it keeps never trained on, whichever selection
// ran. It calls these at two places: the k-fold selection (selectEpochs) keeps its folds' held-out
// candidates after every epoch (foldCalibration fits on those of the selected epoch), and the end of fit()
// attaches a calibration (calibrateAtEnd) fitted on the held-out slice that chose the epochs (the best or
// annealed epoch's weights are kept, and never trained on it), or the one the selection fitted (the refit's
// copy, on its own slice; the k-fold folds). A procedure with another held-out set calls calibrateOn with it.
import type { SparseDataset } from '../datasets/csr.js';
import type { Network } from '../network/network.js';
import {
  calibrationPairs, concatPairs, DEFAULT_CALIBRATION_SHORTLIST, fitCalibration,
  type CalibrationOptions, type CalibrationPairs, type ProbabilityCalibration,
} from '../network/calibration.js';
import type { Executor } from '../network/executor.js';
import { rerankCombine } from '../network/rerank.js';
import type { FitStats } from './fit.js';
import type { SelectionReport } from './early-stop.js';

/** Candidates per point that get a probability: CalibrationOptions.shortlist, at most the labels. */
export function calibrationShortlist(net: Network, o: CalibrationOptions | undefined): number {
  const s = o?.shortlist ?? DEFAULT_CALIBRATION_SHORTLIST;
  if (!Number.isInteger(s) || s < 1 || s > 4096) throw new Error(`Expected integer from 1 to 4096 for calibration.shortlist but received ${JSON.stringify(o?.shortlist)}`);
  return Math.min(s, net.config.layers.at(-1)!.size);
}

/**
 * A calibration of `net` (as it is now, with its re-ranker) fitted on `held`, points its weights never
 * trained on, as training holds them: on shared memory, already divided by the network's input scaling
 * (predict() would divide them again). They are predicted as predict() does by default ('auto': sampled,
 * `candidates` per point, for a sampled output layer with a wide part, as held-out scoring does; else
 * exact), so that the map fits the scores a user gets.
 */
export async function calibrateOn(
  net: Network, exec: Executor, held: SparseDataset, o: CalibrationOptions, candidates: number, scored: HeldRerankScores | null = null,
): Promise<ProbabilityCalibration> {
  const K = calibrationShortlist(net, o);
  const pred = fromRerankScores(net, held, K, candidates, scored) ?? await net.predictWith(exec, held, K, net.inferenceMode('auto'), 256, candidates);
  return fitCalibration(calibrationPairs(pred.labels, pred.scores, K, held), K, o);
}

/**
 * The held-out slice's network shortlists and their classifiers' scores, as the re-ranker's weight was
 * chosen on them (fit-network.ts trainReranker): the network's top S (labels, probs: points x S) predicted in
 * `mode` with `candidates`, and the classifiers' scores `s` of those (points x S).
 */
export interface HeldRerankScores {
  labels: Uint32Array;
  probs: Float32Array;
  s: Float32Array;
  S: number;
  mode: 'exact' | 'sampled';
  candidates: number;
}

/**
 * What net.predictWith(held, K, 'auto', candidates) returns, taken from the scores the re-ranker's weight was
 * chosen on (the same prediction of the same weights, then rerankCombine at the weight chosen, as predictWith
 * combines them), instead of a second pass over the slice; null when they do not give it (no re-ranker
 * applied, another mode, another candidate count, or a shortlist that is not the one predictWith would ask for).
 */
function fromRerankScores(net: Network, held: SparseDataset, K: number, candidates: number, c: HeldRerankScores | null): { labels: Uint32Array; scores: Float32Array } | null {
  const rr = net.rerank;
  if (!c || !rr || rr.weight === 0) return null;
  const S = Math.min(Math.max(K, rr.shortlist), net.config.layers.at(-1)!.size);
  if (c.S !== S || c.mode !== net.inferenceMode('auto') || c.candidates !== candidates || c.labels.length !== held.points * S) return null;
  const labels = new Uint32Array(held.points * K), scores = new Float32Array(held.points * K);
  rerankCombine(c.labels, c.probs, c.s, S, rr.weight, K, labels, scores);
  return { labels, scores };
}

/**
 * The end of fit(): fitted on `holdout` (the held-out slice the kept weights never trained on), else the
 * one the selection fitted; sets net.calibration. Returns FitStats.calibration. `scored`: the slice's
 * predictions the re-ranker's weight was chosen on (calibrateOn).
 */
export async function calibrateAtEnd(
  net: Network, exec: Executor, o: CalibrationOptions, holdout: SparseDataset | null, selection: SelectionReport | undefined, candidates: number,
  scored: HeldRerankScores | null = null,
): Promise<NonNullable<FitStats['calibration']>> {
  let cal: ProbabilityCalibration;
  if (holdout) cal = await calibrateOn(net, exec, holdout, o, candidates, scored);
  else if (selection?.calibration) cal = selection.calibration;
  else return { skipped: selection ? 'the selection that chose the epochs recorded none (a run resumed from a checkpoint written before calibration)' : 'no held-out points (validation is off)' };
  net.calibration = cal;
  return { threshold: cal.threshold, shortlist: cal.shortlist, ...cal.report };
}

/**
 * k-fold selection: the calibration of every point's candidates as the fold that held it out scored them,
 * at the selected epoch (`foldPairs[f][e - 1]`: fold f's held-out pairs after epoch e). Undefined when a
 * fold has none for that epoch.
 */
export function foldCalibration(foldPairs: CalibrationPairs[][], epochs: number, shortlist: number, o: CalibrationOptions): ProbabilityCalibration | undefined {
  const atEpoch = foldPairs.map((p) => p[epochs - 1]);
  if (epochs < 1 || atEpoch.some((p) => p === undefined)) return undefined;
  return fitCalibration(concatPairs(atEpoch as CalibrationPairs[]), shortlist, o);
}
