// Split files of the Extreme Classification Repository (e.g. bibtex_trSplit.txt / bibtex_tstSplit.txt):
// whitespace-separated columns, one per split (Bibtex ships 10), each entry a 1-based row number into the
// data lines of the matching data file (its header line not counted). Column k of the train file and
// column k of the test file together give split k.
import { readFileSync } from 'node:fs';
import { sharedFloat32, sharedUint32, type SparseDataset } from './csr.js';
import { DataFormatError, quoteToken } from './errors.js';
import { boundText } from '../util/bounded-text.js';

/** Options of `readSplit`. */
export interface ReadSplitOptions {
  /** Name used for the file in error messages. Default: the path as given. */
  displayName?: string;
}

/**
 * Reads column `column` (1-based) of a split file and returns its rows as 0-based row ids, in file order.
 * `numPoints` is the number of points of the data file the rows index. Errors (DataFormatError,
 * `file:line: problem`): a column the file does not have, lines with differing column counts, an entry
 * that is not a positive integer, a row outside [1, numPoints], a row listed twice in the column.
 * Blank lines at the end are fine. Split files are small, so this reads the file synchronously.
 *
 * @example
 * ```ts
 * const data = await readXC('Bibtex_data.txt');
 * const rows = readSplit('bibtex_trSplit.txt', 1, data.points); // split 1
 * const train = subset(data, rows);
 * ```
 */
export function readSplit(path: string, column: number, numPoints: number, opts: ReadSplitOptions = {}): Uint32Array {
  if (!(Number.isInteger(column) && column >= 1)) {
    throw new Error(`Expected positive integer for column (1-based) but received ${column}`);
  }
  if (!(Number.isInteger(numPoints) && numPoints >= 0)) {
    throw new Error(`Expected non-negative integer for numPoints but received ${numPoints}`);
  }
  const file = opts.displayName ?? path;
  const lines = readFileSync(path, 'latin1').split('\n');
  const rows: number[] = [];
  // Line on which each row was first listed (0 = not yet), to report duplicates with both places.
  const seenAt = new Uint32Array(numPoints);
  let columns = 0, columnsLine = 0, blank = 0;
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const text = lines[i]!.trim();
    if (text === '') {
      if (blank === 0) blank = lineNo;
      continue;
    }
    if (blank !== 0) throw new DataFormatError(file, blank, 'blank line inside the split file');
    const parts = text.split(/[ \t\r]+/);
    if (columns === 0) {
      columns = parts.length;
      columnsLine = lineNo;
      if (column > columns) {
        throw new DataFormatError(file, lineNo, `column ${column} out of range: the split file has ${columns} column${columns === 1 ? '' : 's'}`);
      }
    } else if (parts.length !== columns) {
      throw new DataFormatError(file, lineNo, `line has ${parts.length} columns but line ${columnsLine} has ${columns}`);
    }
    const tok = parts[column - 1]!;
    if (!/^\d+$/.test(tok)) {
      throw new DataFormatError(file, lineNo, `non-integer row ${quoteToken(tok)} in column ${column}`);
    }
    const row = Number(tok);
    if (row < 1 || row > numPoints) {
      throw new DataFormatError(file, lineNo, `row ${boundText(tok)} in column ${column} out of range [1, ${numPoints}]`);
    }
    if (seenAt[row - 1] !== 0) {
      throw new DataFormatError(file, lineNo, `row ${row} appears twice in column ${column} (first on line ${seenAt[row - 1]})`);
    }
    seenAt[row - 1] = lineNo;
    rows.push(row - 1);
  }
  if (columns === 0) throw new DataFormatError(file, 0, 'empty split file');
  return Uint32Array.from(rows);
}

/**
 * The rows `rows` of `dataset` (0-based, in the given order; repeats allowed) as a new dataset on
 * SharedArrayBuffers with the same features/labels dimensions.
 *
 * @example
 * ```ts
 * const firstHundred = subset(data, Array.from({ length: 100 }, (_, i) => i));
 * ```
 */
export function subset(dataset: SparseDataset, rows: ArrayLike<number>): SparseDataset {
  const d = dataset;
  const n = rows.length;
  let nnz = 0, nl = 0;
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    if (!(Number.isInteger(r) && r >= 0 && r < d.points)) {
      throw new RangeError(`Expected row ids in [0, ${d.points}) but received ${r} at position ${i}`);
    }
    nnz += d.offsets[r + 1]! - d.offsets[r]!;
    nl += d.labelOffsets[r + 1]! - d.labelOffsets[r]!;
  }
  const offsets = sharedUint32(n + 1), labelOffsets = sharedUint32(n + 1);
  const indices = sharedUint32(nnz), values = sharedFloat32(nnz), labelIndices = sharedUint32(nl);
  let k = 0, m = 0;
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    const a = d.offsets[r]!, b = d.offsets[r + 1]!;
    indices.set(d.indices.subarray(a, b), k);
    values.set(d.values.subarray(a, b), k);
    k += b - a;
    offsets[i + 1] = k;
    const la = d.labelOffsets[r]!, lb = d.labelOffsets[r + 1]!;
    labelIndices.set(d.labelIndices.subarray(la, lb), m);
    m += lb - la;
    labelOffsets[i + 1] = m;
  }
  return { points: n, features: d.features, labels: d.labels, offsets, indices, values, labelOffsets, labelIndices };
}
