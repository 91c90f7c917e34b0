// Label names <-> label ids, and raw-text points -> a labelled SparseDataset.
//
// Ids are given in order of first appearance (the training file's first line's labels are 0, 1, ...);
// a model trained on text stores its names (Network.labelNames, index = id). Growing a model with new
// data appends the names it has never seen after the old ones, so old ids keep their meaning.
import type { SparseDataset } from '../datasets/csr.js';
import { sharedUint32 } from '../datasets/csr.js';
import type { TextData } from '../datasets/text-reader.js';
import type { TextVectorizer } from './vectorizer.js';

/** A list of label names with its name -> id index. */
export class LabelNames {
  readonly names: string[];
  private readonly ids = new Map<string, number>();

  constructor(names: readonly string[] = []) {
    this.names = [];
    for (const n of names) this.add(n);
  }

  get size(): number {
    return this.names.length;
  }

  /** The id of `name`, or -1. */
  idOf(name: string): number {
    return this.ids.get(name) ?? -1;
  }

  /** The id of `name`, appending it when new. Names must be non-empty, without a comma or line break. */
  add(name: string): number {
    const id = this.ids.get(name);
    if (id !== undefined) return id;
    if (typeof name !== 'string' || name === '' || /[,\n\r\t]/.test(name)) {
      throw new Error(`Expected a label name without commas, tabs or line breaks but received ${JSON.stringify(name)}`);
    }
    this.ids.set(name, this.names.length);
    this.names.push(name);
    return this.names.length - 1;
  }
}

/** Result of `labelledDataset`. */
export interface LabelledText {
  /** tf-idf rows with label ids (labels = the names' count after any growth). */
  dataset: SparseDataset;
  /** Label occurrences dropped because their name is unknown (only when `grow` is false). */
  unknownLabels: number;
}

/**
 * Vectorizes `data` and encodes its label names with `names`: unknown names are appended when `grow`
 * (training data), else dropped and counted (test data: a model cannot predict a label it has no output
 * for, so such a label only ever counts as a miss). Repeated names on one line count once.
 */
export function labelledDataset(data: TextData, vectorizer: TextVectorizer, names: LabelNames, grow: boolean): LabelledText {
  const x = vectorizer.transform(data.texts);
  const labelOffsets = sharedUint32(data.points + 1);
  let total = 0;
  for (const l of data.labels) total += l.length;
  const tmp = new Uint32Array(total);
  let n = 0, unknown = 0;
  for (let i = 0; i < data.points; i++) {
    const start = n;
    for (const name of data.labels[i]!) {
      const id = grow ? names.add(name) : names.idOf(name);
      if (id < 0) {
        unknown++;
        continue;
      }
      tmp[n++] = id;
    }
    const row = tmp.subarray(start, n).sort();
    // Remove repeats within the row.
    let w = start;
    for (let q = 0; q < row.length; q++) if (q === 0 || row[q] !== row[q - 1]) tmp[w++] = row[q]!;
    n = w;
    labelOffsets[i + 1] = n;
  }
  const labelIndices = sharedUint32(n);
  labelIndices.set(tmp.subarray(0, n));
  return { dataset: { ...x, labels: names.size, labelOffsets, labelIndices }, unknownLabels: unknown };
}
