// What `sublinear predict` prints. Both formats keep the input's point order, so point i of the input
// (0-based) is the i-th record:
//   xc     the Extreme Classification Repository's sparse score-matrix format: a header `points labels`,
//          then one line per point of `label:score` pairs in descending score order (what XC tools such as
//          pyxclib's read_sparse_file load, e.g. to compute metrics; a point's line is line i + 2);
//   jsonl  one JSON object per line: {"id": i, "labels": [...], "scores": [...]}; labels are names for a
//          model with label names (a model trained on text), else ids; a calibrated model adds
//          "probabilities", and predict --explain "explanations" (src/network/explain.ts).
// Scores are the softmax probabilities over the scored outputs; with selection by calibrated probability
// (--threshold on a calibrated model) xc prints the probabilities, in the order they chose. Output is written in blocks and waits
// for the consumer (a pipe, `head`), so memory stays flat however many points there are.
import type { Predictions } from '../network/network.js';
import type { LabelExplanation } from '../network/explain.js';

export type PredictFormat = 'xc' | 'jsonl';

/** What is printed besides labels and scores. */
export interface PredictOutputOptions {
  /** Label names, index = id (jsonl prints names). */
  names?: readonly string[];
  /** Only the labels whose score reaches this (a model without calibration: softmax scores). Default 0. */
  threshold?: number;
  /** xc: print the probabilities (selection by probability) in place of the scores. Default false. */
  probabilities?: boolean;
  /** jsonl: per point, its labels' explanations (Network.explain), and the token(s) of a feature of point i (text models). */
  explanations?: LabelExplanation[][];
  tokens?: (point: number, features: number[]) => (string | null)[];
}

const round = (x: number) => Number(x.toPrecision(6));

/** Formats points [from, to) of `p`. */
export function formatPredictions(p: Predictions, format: PredictFormat, from: number, to: number, o: PredictOutputOptions = {}): string {
  const k = p.k, names = o.names, threshold = o.threshold ?? 0;
  const lines: string[] = [];
  for (let i = from; i < to; i++) {
    const labels: number[] = [];
    const scores: number[] = [];
    const probs: number[] = [];
    for (let j = 0; j < k; j++) {
      const l = p.labels[i * k + j]!;
      if (l === 0xffffffff) break; // fewer than k outputs were scored (or passed the threshold)
      if (p.scores[i * k + j]! < threshold) break; // descending: the rest score less too
      labels.push(l);
      scores.push(round(p.scores[i * k + j]!));
      if (p.probabilities) probs.push(round(p.probabilities[i * k + j]!));
    }
    if (format === 'jsonl') {
      const rec: Record<string, unknown> = { id: i, labels: names ? labels.map((l) => names[l] ?? l) : labels, scores };
      if (p.probabilities) rec.probabilities = probs;
      const ex = o.explanations?.[i];
      if (ex) {
        rec.explanations = ex.map((e) => {
          const tokens = o.tokens?.(i, e.features.map((c) => c.feature));
          return {
            label: names ? names[e.label] ?? e.label : e.label, score: round(e.score), bias: round(e.bias), rest: round(e.rest),
            features: e.features.map((c, t) => ({ feature: c.feature, ...(tokens ? { token: tokens[t] } : {}), contribution: round(c.contribution) })),
          };
        });
      }
      lines.push(JSON.stringify(rec));
    } else {
      const values = o.probabilities ? probs : scores;
      lines.push(labels.map((l, j) => `${l}:${values[j]}`).join(' '));
    }
  }
  return lines.length ? lines.join('\n') + '\n' : '';
}

/** Writes all predictions to `io.out`, the xc header first; awaits `io.drain` between blocks. */
export async function writePredictions(
  p: Predictions, format: PredictFormat, outputs: number,
  io: { out(text: string): void; drain?: () => Promise<void> },
  o: PredictOutputOptions = {},
): Promise<void> {
  if (format === 'xc') io.out(`${p.points} ${outputs}\n`);
  const block = 4096;
  for (let from = 0; from < p.points; from += block) {
    io.out(formatPredictions(p, format, from, Math.min(p.points, from + block), format === 'jsonl' ? o : { ...o, names: undefined }));
    await io.drain?.();
  }
}
