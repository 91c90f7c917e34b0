// The lines `sublinear train` says as it goes, in every mode: what each phase is doing as it starts, the
// report's phases, and what training chose (src/job/train.ts and train-sharded.ts).
import type { FitStats } from '../train/fit.js';
import type { PhaseTimer } from '../util/phases.js';
import type { Reporter } from './events.js';

/** What the lines after training read: the statistics and the checkpoints written. */
export interface TrainedLines {
  stats: FitStats;
  checkpoint: { dir: string } | undefined;
  checkpoints: number;
}

/** What the progress says when phase `name` (src/util/phases.ts) starts; null: nothing (the epochs, the reading and the held-out scoring have their own lines). */
export function phaseText(name: string): string | null {
  const copy = name.startsWith('selection.') ? ' (the selection copy)' : '';
  switch (name.replace(/^selection\./, '')) {
    case 'kfold': return 'choosing the number of epochs by k-fold cross-validation';
    case 'wide': return `choosing the wide part's features per label${copy}`;
    case 'blend': return `weighing the network's logits against the wide part on the held-out slice${copy}`;
    case 'rerank.shortlists': return `re-ranker: the network's shortlist of every training point${copy}`;
    case 'rerank.classifiers': return `re-ranker: training the per-label classifiers${copy}`;
    case 'rerank.weight': return `re-ranker: choosing its weight${copy}`;
    case 'calibration': return `calibrating the probabilities on the held-out points${copy}`;
    case 'save': return 'saving the model';
    case 'test': return 'evaluating the test set';
    default: return null;
  }
}

/**
 * The report's `phases`: seconds per phase (src/util/phases.ts), `total` the process's wall-clock time so far
 * (from its start: Node's own start-up included) and `other` what no phase accounts for (start-up, building
 * the network, the plan, evaluation during training with evalEvery).
 */
export function phaseSummary(phases: PhaseTimer): Record<string, number> {
  const s = phases.snapshot();
  const total = performance.now() / 1000;
  const counted = Object.values(s).reduce((a, b) => a + b, 0);
  return { ...s, other: Math.round(Math.max(0, total - counted) * 1000) / 1000, total: Math.round(total * 1000) / 1000 };
}

/** The lines after training: time, checkpoints, scaling, what selection and the re-ranker chose. */
export function sayTrained(r: Reporter, trained: TrainedLines, points: number): void {
  const { stats, checkpoint } = trained;
  r.say(`trained ${stats.samples} samples in ${stats.trainSeconds.toFixed(1)} s (${Math.round(stats.samplesPerSec)} samples/s; ` +
    `hash-table rebuilds ${stats.rebuildSeconds.toFixed(1)} s = ${(100 * stats.rebuildSeconds / Math.max(stats.trainSeconds, 1e-9)).toFixed(1)}%)` +
    `${stats.aborted ? ' (stopped early)' : ''}`);
  const failed = stats.checkpointFailures?.length ?? 0;
  if (checkpoint) r.say(`${trained.checkpoints} checkpoint(s) written to ${checkpoint.dir}${failed ? `, ${failed} failed` : ''}`);
  if (stats.inputScaling?.scaled) r.say(`inputs ${stats.inputScaling.method === 'log' ? 'transformed' : 'scaled'}: ${stats.inputScaling.reason} (stored in the model; predict and eval apply it)`);
  const sel = stats.selection;
  if (sel?.method === 'kfold') {
    r.say(`epochs chosen by ${sel.folds}-fold cross-validation: ${sel.epochs} (mean held-out P@1 ${sel.p1[sel.epochs - 1]?.toFixed(4) ?? '-'}; ` +
      `a held-out slice would hold only ${sel.holdoutPoints} points), then trained on all ${points} points`);
  }
  if (sel?.method === 'holdout' && sel.refit) {
    r.say(`epochs chosen on ${sel.points} held-out points by a copy of the network: ${sel.epochs} (held-out P@1 ${sel.refit.p1[sel.epochs - 1]?.toFixed(4) ?? '-'}; ` +
      `${sel.refit.p1.length} epochs trained), then trained on all ${points} points`);
  }
  if (stats.bestEpoch) r.say(`kept the weights of epoch ${stats.bestEpoch} (best held-out score of ${stats.validation!.length} epochs; ${stats.validationPoints} points held out)`);
  const b = stats.blend;
  if (b) {
    const at = (x: number) => b.tried.find((t) => t.scale === x)?.p1.toFixed(4) ?? '-';
    r.say(`network logits weighted x${b.scale} against the wide part (held-out P@1 at epoch ${b.epoch}: ${at(b.scale)}; ${at(1)} at x1)`);
  }
  sayCalibrated(r, stats);
  const rr = stats.rerank;
  if (rr?.skipped) r.say(`re-ranker not trained: ${rr.skipped}`);
  else if (rr) {
    const at = (x: number) => rr.tried.find((t) => t.weight === x)?.p1.toFixed(4) ?? '-';
    const size = `${rr.entries} classifier weights, ${(rr.bytes / 2 ** 20).toFixed(1)} MB`;
    const on = stats.selection?.method === 'kfold' ? 'cross-validated' : 'held-out';
    r.say(rr.weight > 0
      ? `re-ranker: per-label classifiers weighted x${rr.weight} on the network's top candidates (${size}; ${rr.seconds.toFixed(1)} s${rr.points ? `; ${on} P@1 ${at(rr.weight)}, ${at(0)} without` : ''})`
      : `re-ranker: dropped, it did not help on the ${on} points (P@1 ${at(0)} without)`);
  }
}

/** What the calibration of the probabilities found on the held-out points (FitStats.calibration), or why there is none. */
function sayCalibrated(r: Reporter, stats: FitStats): void {
  const c = stats.calibration;
  if (c && 'skipped' in c) r.say(`probabilities not calibrated: ${c.skipped}`);
  else if (c) {
    r.say(`probabilities: calibrated on ${c.points} held-out points (${c.ownLabels} labels with their own fit; ECE ${c.ece.toFixed(4)}, softmax scores ${c.eceScores.toFixed(4)}); ` +
      `threshold ${c.threshold.toFixed(3)} (held-out micro-F1 ${c.microF1.toFixed(4)}; best top-k cut, k ${c.topk}: ${c.topkMicroF1.toFixed(4)})`);
  }
}
