// What `sublinear predict` prints. Both formats keep the input's point order, so point i of the input
// (0-based) is the i-th record:
//   xc     the Extreme Classification Repository's sparse score-matrix format: a header `points labels`,
//          then one line per point of `label:score` pairs in descending score order (what XC tools such as
//          pyxclib's read_sparse_file load, e.g. to compute metrics; a point's line is line i + 2);
//   jsonl  one JSON object per line: {"id": i, "labels": [...], "scores": [...]}; labels are names for a
//          model with label names (a model trained on text), else ids.
// Scores are the softmax probabilities over the scored outputs. Output is written in blocks and waits
// for the consumer (a pipe, `head`), so memory stays flat however many points there are.
import type { Predictions } from '../network/network.js';

export type PredictFormat = 'xc' | 'jsonl';

/** Formats points [from, to) of `p`. */
export function formatPredictions(p: Predictions, format: PredictFormat, from: number, to: number, names?: readonly string[]): string {
  const k = p.k;
  const lines: string[] = [];
  for (let i = from; i < to; i++) {
    const labels: number[] = [];
    const scores: number[] = [];
    for (let j = 0; j < k; j++) {
      const l = p.labels[i * k + j]!;
      if (l === 0xffffffff) break; // fewer than k outputs were scored
      labels.push(l);
      scores.push(Number(p.scores[i * k + j]!.toPrecision(6)));
    }
    lines.push(format === 'jsonl'
      ? JSON.stringify({ id: i, labels: names ? labels.map((l) => names[l] ?? l) : labels, scores })
      : labels.map((l, j) => `${l}:${scores[j]}`).join(' '));
  }
  return lines.length ? lines.join('\n') + '\n' : '';
}

/** Writes all predictions to `io.out`, the xc header first; awaits `io.drain` between blocks. */
export async function writePredictions(
  p: Predictions, format: PredictFormat, outputs: number,
  io: { out(text: string): void; drain?: () => Promise<void> },
  names?: readonly string[],
): Promise<void> {
  if (format === 'xc') io.out(`${p.points} ${outputs}\n`);
  const block = 4096;
  for (let from = 0; from < p.points; from += block) {
    io.out(formatPredictions(p, format, from, Math.min(p.points, from + block), format === 'jsonl' ? names : undefined));
    await io.drain?.();
  }
}
