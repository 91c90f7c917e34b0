// Reader for raw-text data: one point per line, label names then free text.
//
//   label,label<TAB>free text ...          labels: names separated by commas (may be empty: no labels)
//   __label__name __label__other free text fastText's form (a line without a TAB): every whitespace-separated
//                                          token that starts with __label__ is a label, the rest is the text
//   free text                              a line without a TAB and without __label__ tokens: no labels
//
// Lines end in '\n' (a '\r' before it is dropped); a UTF-8 byte order mark at the start is skipped. Label
// names are trimmed of surrounding spaces. Every problem is a DataFormatError `file:line: problem`:
// bytes that are not UTF-8, an empty text, an empty label name (`a,,b`, a trailing comma), a fastText
// label whose name holds a comma (names are written comma-separated by `data featurize` and in model
// files), a line longer than `maxLineBytes`. Blank lines are allowed only at the end of the file.
import { DataFormatError, quoteToken } from './errors.js';
import { LineTooLongError, ReadMemory, rethrowReadError, streamLines, type StreamOptions } from './line-parser.js';

/** Default of ReadTextOptions.maxLineBytes: 1 MiB. */
export const MAX_TEXT_LINE_BYTES = 1024 * 1024;

/** Options of `readText`. */
export interface ReadTextOptions extends StreamOptions {
  /** Name used for the file in error messages. Default: the path as given. */
  displayName?: string;
  /** Longest line accepted, in bytes (label names and text together). Default 1 MiB. */
  maxLineBytes?: number;
}

/** The points of a raw-text file, in file order. */
export interface TextData {
  /** Number of points. */
  points: number;
  /** (points) each point's text (labels removed). */
  texts: string[];
  /** (points) each point's label names, in the order written (possibly none). */
  labels: string[][];
  /** (points) the 1-based line of each point, for error messages. */
  lines: Uint32Array;
}

const LABEL_PREFIX = '__label__';
const NL = 10, CR = 13;

/**
 * Parses one line (without its line end) into label names and text, or throws a DataFormatError.
 * Exported for the tests and for callers that hold text in memory (`parseTextLine(s, '<input>', 1)`).
 */
export function parseTextLine(line: string, file: string, lineNo: number): { labels: string[]; text: string } {
  const tab = line.indexOf('\t');
  let labels: string[];
  let text: string;
  if (tab >= 0) {
    const field = line.slice(0, tab);
    text = line.slice(tab + 1);
    labels = [];
    if (field.trim() !== '') {
      for (const raw of field.split(',')) {
        let name = raw.trim();
        if (name.startsWith(LABEL_PREFIX)) name = name.slice(LABEL_PREFIX.length);
        if (name === '') throw new DataFormatError(file, lineNo, `empty label name in ${quoteToken(field)} (label names are separated by single commas)`);
        labels.push(name);
      }
    }
  } else {
    labels = [];
    const words: string[] = [];
    for (const w of line.split(/[ \t\v\f]+/)) {
      if (w.startsWith(LABEL_PREFIX)) {
        const name = w.slice(LABEL_PREFIX.length);
        if (name === '') throw new DataFormatError(file, lineNo, `empty label name in ${quoteToken(w)}`);
        if (name.includes(',')) throw new DataFormatError(file, lineNo, `label name ${quoteToken(name)} contains a comma (label names cannot)`);
        labels.push(name);
      } else if (w !== '') {
        words.push(w);
      }
    }
    text = labels.length ? words.join(' ') : line;
  }
  if (text.trim() === '') throw new DataFormatError(file, lineNo, 'empty text (a point needs some text after its labels)');
  return { labels, text };
}

/**
 * Reads a raw-text file (format above), streaming it in chunks.
 *
 * @example
 * ```ts
 * const data = await readText('docs.txt');
 * data.texts[0]; data.labels[0]; // 'Perl module for ...', ['devel::lang:perl', 'implemented-in::perl']
 * ```
 */
export async function readText(path: string, opts: ReadTextOptions = {}): Promise<TextData> {
  const file = opts.displayName ?? path;
  const maxLine = opts.maxLineBytes ?? MAX_TEXT_LINE_BYTES;
  if (!Number.isInteger(maxLine) || maxLine <= 0) throw new Error(`Expected positive integer for maxLineBytes but received ${JSON.stringify(opts.maxLineBytes)}`);
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const texts: string[] = [];
  const labels: string[][] = [];
  const lines: number[] = [];
  let line = 0;
  let blank = 0;
  // Estimated bytes of the strings held (UTF-16 text, label names, per-point overhead), against maxMemoryBytes.
  let held = 0;
  const limit = opts.maxMemoryBytes ?? Infinity;
  // The read buffers count against the limit with the strings.
  const memory = new ReadMemory(opts);
  memory.data = () => held;
  try {
    await streamLines(path, (buf, start, end) => {
      let pos = start;
      while (pos < end) {
        line++;
        let nl = buf.indexOf(NL, pos);
        if (nl < 0 || nl >= end) nl = end - 1; // unreachable: the chunk ends in '\n'
        let stop = nl;
        if (stop > pos && buf[stop - 1] === CR) stop--;
        if (stop - pos > maxLine) throw new DataFormatError(file, line, `line longer than ${maxLine} bytes`);
        if (stop === pos) {
          if (blank === 0) blank = line;
          pos = nl + 1;
          continue;
        }
        if (blank !== 0) throw new DataFormatError(file, blank, 'blank line inside the data (every point needs a text)');
        let s: string;
        try {
          s = decoder.decode(buf.subarray(pos, stop));
        } catch {
          throw new DataFormatError(file, line, `invalid UTF-8 at byte ${firstInvalidUtf8(buf.subarray(pos, stop)) + 1} of the line`);
        }
        const p = parseTextLine(s, file, line);
        held += 2 * p.text.length + 96 + p.labels.reduce((a, l) => a + 2 * l.length + 40, 0);
        if (held + memory.buffers > limit) {
          const mb = (b: number) => `${(b / 1e6).toPrecision(3)} MB`;
          throw new DataFormatError(file, 0, `cannot be read within the memory limit: its text needs more than ${mb(limit - memory.buffers)} by line ${line} (besides ${mb(memory.buffers)} of read buffers; the limit is ${mb(limit)})`);
        }
        texts.push(p.text);
        labels.push(p.labels);
        lines.push(line);
        pos = nl + 1;
      }
    }, { chunkBytes: opts.chunkBytes, onProgress: opts.onProgress, maxLineBytes: maxLine + 2, maxMemoryBytes: opts.maxMemoryBytes }, memory);
  } catch (e) {
    if (e instanceof LineTooLongError) throw new DataFormatError(file, line + 1, `line longer than ${maxLine} bytes`);
    rethrowReadError(e, file, line + 1);
  }
  return { points: texts.length, texts, labels, lines: Uint32Array.from(lines) };
}

/** Index of the first byte of `b` that starts an invalid UTF-8 sequence (b.length when valid). */
export function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    let n: number;
    if (c < 0x80) n = 0;
    else if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c >= 0xe0 && c <= 0xef) n = 2;
    else if (c >= 0xf0 && c <= 0xf4) n = 3;
    else return i;
    for (let j = 1; j <= n; j++) {
      const d = b[i + j];
      if (d === undefined || (d & 0xc0) !== 0x80) return i;
    }
    // Overlong 3- and 4-byte forms, surrogates and code points above U+10FFFF.
    if (n === 2 && ((c === 0xe0 && b[i + 1]! < 0xa0) || (c === 0xed && b[i + 1]! >= 0xa0))) return i;
    if (n === 3 && ((c === 0xf0 && b[i + 1]! < 0x90) || (c === 0xf4 && b[i + 1]! >= 0x90))) return i;
    i += n + 1;
  }
  return b.length;
}
