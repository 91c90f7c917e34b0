// Reader for the Extreme Classification Repository text format:
//
//   N D L                          header: points, features, labels
//   l1,l2,... f:v f:v ...          one point per line, 0-based ids
//    f:v f:v ...                   a point with no labels starts with a space
//
// Streaming: the file is read in chunks and parsed byte by byte (src/datasets/line-parser.ts), so memory stays
// near the size of the resulting CSR however large the file. The header's sizes are trusted only as far as
// the file's byte count allows before the data confirms them (see LineParser.reserveFromSample).
// Rows whose feature or label ids are not increasing are sorted; repeated ids are errors (line-parser.ts).
import type { SparseDataset } from './csr.js';
import { DataFormatError, quoteToken } from './errors.js';
import { boundText } from '../util/bounded-text.js';
import { LineParser, ReadMemory, readerBuilder, rethrowReadError, streamLines, type StreamOptions } from './line-parser.js';

/** Options of `readXC`. */
export interface ReadXCOptions extends StreamOptions {
  /**
   * Name used for the file in error messages. Default: the path as given. (Messages look like
   * `bibtex.txt:17: feature id 2000 out of range [0, 1836)`.)
   */
  displayName?: string;
}

/** The three sizes of an XC header line. */
export interface XCHeader {
  points: number;
  features: number;
  labels: number;
}

/**
 * Reads an XC-format file into a CSR dataset on SharedArrayBuffers.
 * Throws DataFormatError (`file:line: problem`) for anything that is not exactly the format: a bad header,
 * fewer or more points than declared, ids out of range, negative or non-numeric ids, repeated ids in a row,
 * malformed `id:value` pairs, non-finite values.
 *
 * @example
 * ```ts
 * const test = await readXC('test.txt');
 * const top = await (await Network.load('model.sl')).predict(test, { k: 5 });
 * ```
 */
export async function readXC(path: string, opts: ReadXCOptions = {}): Promise<SparseDataset> {
  const file = opts.displayName ?? path;
  let header: XCHeader | undefined;
  let parser: LineParser | undefined;
  let sampled = false;
  const memory = new ReadMemory(opts);
  await streamLines(
    path,
    (buf, start, end, consumed, total, eof) => {
      if (!parser) {
        if (start === end) return; // empty file (reported below)
        // The first chunk always holds at least one complete line: the header.
        const nl = buf.indexOf(10, start);
        const lineEnd = nl < 0 || nl >= end ? end : nl;
        header = parseXCHeader(Buffer.from(buf.buffer, buf.byteOffset + start, lineEnd - start).toString('latin1'), file);
        const pointCap = Math.min(header.points, Math.max(1024, Math.ceil(total / 64)));
        parser = new LineParser(
          { file, features: header.features, labels: header.labels, featureBase: 0, labelBase: 0, maxPoints: header.points, lineOffset: 1 },
          readerBuilder(pointCap, Math.min(total / 4 + 1, 1 << 20), Math.min(total / 2 + 1, 1 << 18), opts, memory),
        );
        start = Math.min(end, lineEnd + 1);
      }
      parser.parse(buf, start, end);
      if (!sampled && !eof) {
        sampled = true;
        parser.reserveFromSample(consumed, total);
      }
    },
    opts,
    memory,
  ).catch((e: unknown) => rethrowReadError(e, file, parser ? parser.line + 1 : 1));
  if (!header || !parser) {
    throw new DataFormatError(file, 1, 'empty file: expected a header "points features labels"');
  }
  const got = parser.builder.points;
  if (got < header.points) {
    throw new DataFormatError(file, parser.lastDataLine + 1,
      `file ends after ${got} points but the header declares ${header.points}`);
  }
  return parser.builder.toDataset(header.features, header.labels);
}

/** Parses `N D L` (whitespace-separated non-negative integers; a trailing '\r' is fine). */
export function parseXCHeader(line: string, file: string): XCHeader {
  const parts = line.trim().split(/[ \t]+/);
  if (parts.length !== 3 || parts.some((p) => !/^\d+$/.test(p))) {
    const shown = line.trim() === '' ? 'an empty line' : quoteToken(line.trim());
    throw new DataFormatError(file, 1, `bad header ${shown}: expected "points features labels" (3 non-negative integers)`);
  }
  const [points, features, labels] = parts.map(Number) as [number, number, number];
  // Ids are Uint32 and so are the offsets that count rows' entries.
  for (const [i, name, v] of [[0, 'points', points], [1, 'features', features], [2, 'labels', labels]] as const) {
    if (v > 0xffffffff) throw new DataFormatError(file, 1, `header declares ${boundText(parts[i]!)} ${name}, more than the supported 4294967295`);
  }
  return { points, features, labels };
}
