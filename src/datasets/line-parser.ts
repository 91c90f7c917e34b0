// The byte-level tokenizer shared by the XC and LIBSVM readers.
//
// Both formats are one point per line: an optional label list `l1,l2,...` followed by `id:value` features,
// separated by spaces or tabs. The reader hands this parser large chunks of raw bytes that contain only
// complete lines; the parser walks the bytes once, parsing integers and floats by hand, and appends straight
// into a CsrBuilder. Nothing on the hot path allocates: no strings, no regexes, no per-line objects.
// Anything the fast path does not recognise (odd float spellings, malformed tokens) goes to a slow path
// that decodes the one token as a string and either accepts it (e.g. `1e-30`, 17-digit mantissas, via
// Number()) or throws a DataFormatError naming the file, the line and the token.
//
// Rules (the same for both formats):
// - A line that starts with whitespace, or whose first token is an `id:value` pair, has no labels.
// - Features whose ids are not increasing are sorted (values stay paired); a repeated feature id is an
//   error (we refuse to guess whether to sum, keep the first or keep the last). The same for labels.
// - A line with nothing on it (after an optional `\r`) is blank. Blank lines are fine at the end of the
//   file; a blank line followed by more data is an error (an empty point is written as a single space).
// - Values must be finite in float32 (`nan`, `inf`, `1e999`, `1e39` are errors). Zeros are kept.
import { open, type FileHandle } from 'node:fs/promises';
import { fsErrorReason } from '../util/fs-errors.js';
import { CsrBuilder, MemoryLimitError } from './csr-builder.js';
import { DataFormatError, quoteToken } from './errors.js';
import { boundText } from '../util/bounded-text.js';

/** Exact powers of ten (1e0..1e22 are exactly representable in float64: Clinger's fast path). */
const P10 = new Float64Array(23);
for (let i = 0, p = 1; i < 23; i++, p *= 10) P10[i] = p;
const TWO53 = 9007199254740992;
/** Largest id + 1 when a dimension is inferred: ids are stored as Uint32 and D must fit in one too. */
const MAX_DIM = 0xffffffff;

const NL = 10, CR = 13, SP = 32, TAB = 9, COLON = 58, COMMA = 44, MINUS = 45, PLUS = 43;

export const BLANK_LINE_PROBLEM =
  'blank line inside the data (a point with no labels and no features is written as a single space)';

/** How a LineParser interprets ids and bounds. */
export interface LineParserConfig {
  /** File name used in error messages. */
  file: string;
  /** Feature dimension D (ids must be < D after removing the base); undefined: infer as max id + 1. */
  features?: number;
  /** Label count L; undefined: infer as max label + 1. */
  labels?: number;
  /** 1 if feature ids in the file are 1-based (LIBSVM), 0 if 0-based (XC). */
  featureBase: 0 | 1;
  /** 1 if label ids in the file are 1-based, 0 if 0-based. */
  labelBase: 0 | 1;
  /** At most this many points (the XC header's N); undefined: unbounded. */
  maxPoints?: number;
  /** Number of lines before the first line handed to `parse` (1 for the XC header), for line numbers. */
  lineOffset: number;
  /**
   * LIBSVM's binary convention: a line whose label is the single token `+1` or `-1` has label 1 or label
   * 0 (stored ids; `1` and `0` mean the same). Default false (a sign is an error).
   */
  signedBinaryLabels?: boolean;
}

export class LineParser {
  readonly builder: CsrBuilder;
  /** Number of the last line parsed (1-based, counting the lines before the data). */
  line: number;
  /** Number of the last line that held a point. */
  lastDataLine: number;
  /** Largest 0-based feature / label id seen, -1 if none. */
  maxFeature = -1;
  maxLabel = -1;
  private blankLine = 0;
  private readonly file: string;
  private readonly fBase: number;
  private readonly lBase: number;
  private readonly fLimit: number;
  private readonly lLimit: number;
  private readonly maxPoints: number;
  private readonly fBounded: boolean;
  private readonly lBounded: boolean;
  private readonly signedLabels: boolean;
  // Results of the slow feature path (avoids allocating a tuple per odd token).
  private slowRaw = 0;
  private slowValue = 0;

  constructor(cfg: LineParserConfig, builder = new CsrBuilder()) {
    this.builder = builder;
    this.file = cfg.file;
    this.fBase = cfg.featureBase;
    this.lBase = cfg.labelBase;
    this.fBounded = cfg.features !== undefined;
    this.lBounded = cfg.labels !== undefined;
    this.fLimit = cfg.features ?? MAX_DIM;
    this.lLimit = cfg.labels ?? MAX_DIM;
    this.maxPoints = cfg.maxPoints ?? Infinity;
    this.signedLabels = cfg.signedBinaryLabels ?? false;
    this.line = cfg.lineOffset;
    this.lastDataLine = cfg.lineOffset;
  }

  /**
   * Pre-sizes the builder from a sample: `consumed` bytes of a `total`-byte file produced the rows parsed
   * so far. Estimates are clamped to what the remaining bytes could possibly hold (a nonzero takes at
   * least 4 bytes `1:1 `, a label 2 bytes `1,`, a point 1 byte) and to the header's point count.
   */
  reserveFromSample(consumed: number, total: number): void {
    const b = this.builder;
    if (consumed <= 0 || b.points === 0) return;
    const scale = (total / consumed) * 1.03;
    const points = Math.min(this.maxPoints, b.points * scale + 1024, total + 1);
    const nnz = Math.min(b.nnz * scale + 4096, total / 4 + 1);
    const labels = Math.min(b.nLabels * scale + 4096, total / 2 + 1);
    b.reserve(points, nnz, labels);
  }

  /**
   * Parses the complete lines in buf[pos, end). Precondition: end === pos or buf[end - 1] is '\n' (the
   * stream reader appends one after an unterminated last line). Because every line ends in '\n', the
   * scanning loops stop at it without bounds checks.
   */
  parse(buf: Uint8Array, pos: number, end: number): void {
    const b = this.builder;
    let line = this.line;
    let idx = b.indices, val = b.values, lab = b.labelIndices;
    let nnz = b.nnz, nl = b.nLabels;
    const fBase = this.fBase, lBase = this.lBase, fLimit = this.fLimit, lLimit = this.lLimit;
    let maxF = this.maxFeature, maxL = this.maxLabel;

    while (pos < end) {
      line++;
      let c = buf[pos]!;
      if (c === NL || (c === CR && buf[pos + 1] === NL)) {
        if (this.blankLine === 0) this.blankLine = line;
        pos += c === NL ? 1 : 2;
        continue;
      }
      if (b.points >= this.maxPoints) {
        // Whitespace-only lines after the declared points are as harmless as blank ones.
        let q = pos;
        while (buf[q] === SP || buf[q] === TAB || buf[q] === CR) q++;
        if (buf[q] === NL) {
          if (this.blankLine === 0) this.blankLine = line;
          pos = q + 1;
          continue;
        }
        throw new DataFormatError(this.file, line, `more points than the header declares (${this.maxPoints})`);
      }
      if (this.blankLine !== 0) throw new DataFormatError(this.file, this.blankLine, BLANK_LINE_PROBLEM);
      const rowF = nnz, rowL = nl;
      let prevF = -1, prevL = -1;
      let unsortedF = false, unsortedL = false;

      // ---- label list (or a first token that is already a feature) ----
      if (c !== SP && c !== TAB && c !== CR) {
        const tok = pos;
        let d = c - 48;
        const signed = (d < 0 || d > 9) && this.signedLabels ? signedBinaryLabel(buf, pos) : -1;
        if (signed >= 0) {
          // LIBSVM binary label: +1 -> label 1, -1 -> label 0.
          if (signed >= lLimit) throw this.rangeError('label', String(signed), this.lBounded, lLimit, 0, line);
          if (signed > maxL) maxL = signed;
          if (nl === lab.length) {
            b.nLabels = nl;
            b.growLabels(nl + 1);
            lab = b.labelIndices;
          }
          lab[nl++] = signed;
          pos += 2;
        } else if (d < 0 || d > 9) {
          // Not a plain id: a malformed feature (diagnosed by the feature path) or malformed labels.
          if (!tokenHasColon(buf, pos)) this.badLabels(buf, tok, line);
        } else {
          let v = 0;
          do {
            v = v * 10 + d;
            d = buf[++pos]! - 48;
          } while (d >= 0 && d <= 9);
          if (d + 48 === COLON) {
            pos = tok; // the first token is a feature: no labels
          } else {
            for (;;) {
              const id = v - lBase;
              if (id >= lLimit || id < 0) this.labelIdError(buf, tok, line);
              if (id <= prevL) {
                if (id === prevL) throw new DataFormatError(this.file, line, `duplicate label id ${v}`);
                unsortedL = true;
              }
              prevL = id;
              if (id > maxL) maxL = id;
              if (nl === lab.length) {
                b.nLabels = nl;
                b.growLabels(nl + 1);
                lab = b.labelIndices;
              }
              lab[nl++] = id;
              c = buf[pos]!;
              if (c === SP || c === TAB || c === CR || c === NL) break;
              if (c !== COMMA) this.badLabels(buf, tok, line);
              d = buf[++pos]! - 48;
              if (d < 0 || d > 9) this.badLabels(buf, tok, line);
              v = 0;
              do {
                v = v * 10 + d;
                d = buf[++pos]! - 48;
              } while (d >= 0 && d <= 9);
            }
          }
        }
      }

      // ---- features ----
      for (;;) {
        c = buf[pos]!;
        while (c === SP || c === TAB || c === CR) c = buf[++pos]!;
        if (c === NL) {
          pos++;
          break;
        }
        const tok = pos;
        let raw = 0;
        let value = 0;
        let ok = false;
        fast: {
          let d = c - 48;
          if (d < 0 || d > 9) break fast;
          do {
            raw = raw * 10 + d;
            d = buf[++pos]! - 48;
          } while (d >= 0 && d <= 9);
          if (d + 48 !== COLON) break fast;
          c = buf[++pos]!;
          let neg = false;
          if (c === MINUS) {
            neg = true;
            c = buf[++pos]!;
          } else if (c === PLUS) c = buf[++pos]!;
          let mant = 0, digits = 0, scale = 0;
          d = c - 48;
          while (d >= 0 && d <= 9) {
            mant = mant * 10 + d;
            digits++;
            d = buf[++pos]! - 48;
          }
          if (d === -2) {
            // '.'
            d = buf[++pos]! - 48;
            while (d >= 0 && d <= 9) {
              mant = mant * 10 + d;
              digits++;
              scale--;
              d = buf[++pos]! - 48;
            }
          }
          if (digits === 0) break fast;
          c = d + 48;
          if (c === 101 || c === 69) {
            // 'e' | 'E'
            c = buf[++pos]!;
            let eneg = false;
            if (c === MINUS) {
              eneg = true;
              c = buf[++pos]!;
            } else if (c === PLUS) c = buf[++pos]!;
            d = c - 48;
            if (d < 0 || d > 9) break fast;
            let e = 0;
            do {
              e = e * 10 + d;
              d = buf[++pos]! - 48;
            } while (d >= 0 && d <= 9);
            scale += eneg ? -e : e;
            c = d + 48;
          }
          if (c !== SP && c !== TAB && c !== CR && c !== NL) break fast;
          // Outside Clinger's exact range Number() must do the rounding.
          if (mant >= TWO53 || scale < -22 || scale > 22) break fast;
          value = scale < 0 ? mant / P10[-scale]! : mant * P10[scale]!;
          if (neg) value = -value;
          ok = true;
        }
        if (!ok) {
          pos = this.slowFeature(buf, tok, line);
          raw = this.slowRaw;
          value = this.slowValue;
        }
        const id = raw - fBase;
        if (id >= fLimit || id < 0) this.featureIdError(buf, tok, line);
        if (id <= prevF) {
          if (id === prevF) throw new DataFormatError(this.file, line, `duplicate feature id ${raw}`);
          unsortedF = true;
        }
        prevF = id;
        if (id > maxF) maxF = id;
        if (nnz === idx.length) {
          b.nnz = nnz;
          b.growFeatures(nnz + 1);
          idx = b.indices;
          val = b.values;
        }
        idx[nnz] = id;
        val[nnz] = value;
        nnz++;
      }

      if (unsortedF) {
        const dup = sortPairs(idx, val, rowF, nnz);
        if (dup >= 0) throw new DataFormatError(this.file, line, `duplicate feature id ${dup + fBase}`);
      }
      if (unsortedL) {
        const row = lab.subarray(rowL, nl);
        row.sort();
        for (let i = 1; i < row.length; i++) {
          if (row[i] === row[i - 1]) throw new DataFormatError(this.file, line, `duplicate label id ${row[i]! + lBase}`);
        }
      }
      b.nnz = nnz;
      b.nLabels = nl;
      b.endRow();
      this.lastDataLine = line;
    }
    this.line = line;
    this.maxFeature = maxF;
    this.maxLabel = maxL;
  }

  // ---- slow paths (only for odd or bad tokens) ----

  /** Parses one feature token the fast path did not accept; returns the position after it. */
  private slowFeature(buf: Uint8Array, tok: number, line: number): number {
    const endTok = tokenEnd(buf, tok);
    const s = latin1(buf, tok, endTok);
    const colon = s.indexOf(':');
    if (colon < 0) {
      throw new DataFormatError(this.file, line, `malformed feature ${quoteToken(s)} (expected id:value)`);
    }
    const idStr = s.slice(0, colon), valStr = s.slice(colon + 1);
    if (idStr === '') throw new DataFormatError(this.file, line, `malformed feature ${quoteToken(s)} (missing id before ':')`);
    if (/^-\d+$/.test(idStr)) throw new DataFormatError(this.file, line, `negative feature id ${quoteToken(idStr)}`);
    if (!/^\d+$/.test(idStr)) throw new DataFormatError(this.file, line, `non-numeric feature id ${quoteToken(idStr)}`);
    if (valStr === '') throw new DataFormatError(this.file, line, `missing value in feature ${quoteToken(s)}`);
    if (/^[+-]?(nan|inf|infinity)$/i.test(valStr)) {
      throw new DataFormatError(this.file, line, `non-finite value ${quoteToken(valStr)} in feature ${quoteToken(s)}`);
    }
    if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(valStr)) {
      throw new DataFormatError(this.file, line, `non-numeric value ${quoteToken(valStr)} in feature ${quoteToken(s)}`);
    }
    const v = Number(valStr);
    // Values are stored as float32: anything that rounds to +-Infinity there is as unusable as 1e999.
    if (!Number.isFinite(Math.fround(v))) {
      throw new DataFormatError(this.file, line, `non-finite value ${quoteToken(valStr)} in feature ${quoteToken(s)} (outside the float32 range)`);
    }
    this.slowRaw = Number(idStr);
    this.slowValue = v;
    return endTok;
  }

  /** Throws the precise problem of a label list that the fast path rejected. */
  private badLabels(buf: Uint8Array, tok: number, line: number): never {
    const s = latin1(buf, tok, tokenEnd(buf, tok));
    for (const part of s.split(',')) {
      if (part === '') throw new DataFormatError(this.file, line, `empty label id in ${quoteToken(s)}`);
      if (/^-\d+$/.test(part)) throw new DataFormatError(this.file, line, `negative label id ${quoteToken(part)}`);
      if (!/^\d+$/.test(part)) {
        const where = part === s ? '' : ` in ${quoteToken(s)}`;
        throw new DataFormatError(this.file, line, `non-numeric label id ${quoteToken(part)}${where}`);
      }
    }
    throw new DataFormatError(this.file, line, `malformed label list ${quoteToken(s)}`);
  }

  private labelIdError(buf: Uint8Array, tok: number, line: number): never {
    // Find the offending id in the token (the fast path only knows its numeric value).
    const s = latin1(buf, tok, tokenEnd(buf, tok));
    for (const part of s.split(',')) {
      const v = Number(part) - this.lBase;
      if (v < 0 || v >= this.lLimit) throw this.rangeError('label', part, this.lBounded, this.lLimit, this.lBase, line);
    }
    throw new DataFormatError(this.file, line, `label id out of range in ${quoteToken(s)}`);
  }

  private featureIdError(buf: Uint8Array, tok: number, line: number): never {
    const s = latin1(buf, tok, tokenEnd(buf, tok));
    const idStr = s.slice(0, Math.max(0, s.indexOf(':')));
    throw this.rangeError('feature', idStr, this.fBounded, this.fLimit, this.fBase, line);
  }

  private rangeError(kind: string, idStr: string, bounded: boolean, limit: number, base: number, line: number): DataFormatError {
    if (base === 1 && Number(idStr) === 0) {
      return new DataFormatError(this.file, line,
        `${kind} id 0 in a file read with 1-based ${kind} ids (read it as 0-based if its ids start at 0)`);
    }
    if (bounded) {
      return new DataFormatError(this.file, line, `${kind} id ${boundText(idStr)} out of range [${base}, ${limit + base})`);
    }
    return new DataFormatError(this.file, line, `${kind} id ${boundText(idStr)} too large (ids are stored as 32-bit integers)`);
  }
}

/** Position of the first whitespace or newline at or after pos. */
function tokenEnd(buf: Uint8Array, pos: number): number {
  for (;;) {
    const c = buf[pos];
    if (c === undefined || c === SP || c === TAB || c === CR || c === NL) return pos;
    pos++;
  }
}

/** 1 for a token `+1`, 0 for `-1` (each followed by whitespace or the line end), else -1. */
function signedBinaryLabel(buf: Uint8Array, pos: number): number {
  const s = buf[pos], one = buf[pos + 1], after = buf[pos + 2];
  if ((s !== PLUS && s !== MINUS) || one !== 49 || (after !== SP && after !== TAB && after !== CR && after !== NL)) return -1;
  return s === PLUS ? 1 : 0;
}

function tokenHasColon(buf: Uint8Array, pos: number): boolean {
  const e = tokenEnd(buf, pos);
  for (let i = pos; i < e; i++) if (buf[i] === COLON) return true;
  return false;
}

function latin1(buf: Uint8Array, start: number, end: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('latin1');
}

/**
 * Sorts the (id, value) pairs of one row by id; returns a duplicated id, or -1. Rows arrive sorted in
 * practice, so this runs rarely and may allocate.
 */
function sortPairs(idx: Uint32Array, val: Float32Array, start: number, end: number): number {
  const n = end - start;
  const ids = idx.slice(start, end), vals = val.slice(start, end);
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  order.sort((a, b) => ids[a]! - ids[b]!);
  let dup = -1;
  for (let i = 0; i < n; i++) {
    const o = order[i]!;
    idx[start + i] = ids[o]!;
    val[start + i] = vals[o]!;
    if (i > 0 && dup < 0 && idx[start + i] === idx[start + i - 1]) dup = idx[start + i]!;
  }
  return dup;
}

// ---------------------------------------------------------------------------------------------------
// Streaming the file

/** Options for reading a file in chunks. */
export interface StreamOptions {
  /** Called after every chunk with (bytes read so far, file size in bytes). Default: none. */
  onProgress?: (bytesRead: number, totalBytes: number) => void;
  /**
   * Bytes per read. Default 8 MiB. The buffer grows past it only for a single line longer than a chunk.
   * Small values are for tests of lines that straddle chunk boundaries.
   */
  chunkBytes?: number;
  /**
   * Longest line accepted, in bytes. A longer one (a file with no newlines, a binary file) stops the read
   * with LineTooLongError instead of growing the buffer without bound. Default 64 MiB.
   */
  maxLineBytes?: number;
  /**
   * Readers: refuse a file whose data would need more than this many bytes (the CSR arrays as they grow
   * plus the read buffers at their real size: two chunks, or a chunk and a line longer than a chunk while
   * it is carried, up to about 2 x (maxLineBytes + chunkBytes)), with an error naming the file, as soon as
   * it is known. Default: no limit.
   */
  maxMemoryBytes?: number;
  /**
   * Filled in by the read: `bufferBytes` is raised to the most bytes its read buffers held at once (for a
   * memory plan that counts them: they are freed only at a garbage collection; an object shared by several
   * reads ends with the largest). Default: none.
   */
  stats?: { bufferBytes: number };
}

/** Default of StreamOptions.chunkBytes. */
export const CHUNK_BYTES = 8 * 1024 * 1024;

/** Default of StreamOptions.maxLineBytes. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

/** Bytes streamLines may hold for its buffers: two chunks, grown to the longest line allowed. */
export function streamBufferBytes(opts: StreamOptions = {}): number {
  const chunk = Math.max(16, Math.floor(opts.chunkBytes ?? CHUNK_BYTES));
  return 2 * (Math.max(chunk, opts.maxLineBytes ?? MAX_LINE_BYTES) + chunk);
}

const mb = (b: number) => `${(b / 1e6).toPrecision(3)} MB`;

/**
 * What one read holds against StreamOptions.maxMemoryBytes: streamLines' two read buffers at their real
 * size and the reader's data so far (`data`, set by the reader: its CsrBuilder's arrays or its strings).
 * Both are checked together whenever either grows.
 */
export class ReadMemory {
  /** Bytes the read buffers hold now. */
  buffers = 0;
  /** Bytes of the data read so far. Default: 0 (set by the reader). */
  data: () => number = () => 0;
  readonly limit: number;
  private readonly stats: { bufferBytes: number } | undefined;

  constructor(opts: StreamOptions) {
    this.limit = opts.maxMemoryBytes ?? Infinity;
    this.stats = opts.stats;
  }

  /**
   * The read buffers are about to hold `bytes` at once (`line`: the length of a line longer than a chunk
   * that makes them grow, or 0); throws MemoryLimitError if that and the data pass the limit.
   */
  setBuffers(bytes: number, line = 0): void {
    const data = this.data();
    if (bytes + data > this.limit) {
      throw new MemoryLimitError(`the read buffers need ${mb(bytes)}${line ? ` for a line of more than ${mb(line)}` : ''} ` +
        `besides ${mb(data)} of data read so far, more than the memory limit of ${mb(this.limit)}`);
    }
    this.buffers = bytes;
    if (this.stats && bytes > this.stats.bufferBytes) this.stats.bufferBytes = bytes;
  }
}

/**
 * A line longer than StreamOptions.maxLineBytes. Readers turn it into a DataFormatError naming the line
 * (they know how many lines came before it).
 */
export class LineTooLongError extends Error {
  override name = 'LineTooLongError';
  constructor(readonly maxLineBytes: number) {
    super(`line longer than ${maxLineBytes} bytes (is this a text file with one point per line?)`);
  }
}

/**
 * Rethrows a LineTooLongError as the DataFormatError of line `line` of `file`, and a MemoryLimitError as a
 * DataFormatError about the file; other errors unchanged.
 */
export function rethrowReadError(e: unknown, file: string, line: number): never {
  if (e instanceof LineTooLongError) throw new DataFormatError(file, line, e.message);
  if (e instanceof MemoryLimitError) throw new DataFormatError(file, 0, `cannot be read within the memory limit: ${e.message}`);
  throw e;
}

/**
 * A reader's CsrBuilder pre-sized for about `points`, `nnz` and `labels` entries, under
 * StreamOptions.maxMemoryBytes less the read buffers `memory` holds: the initial sizes are scaled down to
 * half of that (they are estimates), and growth past it (the arrays and the buffers together) throws
 * MemoryLimitError. `memory.data` becomes the builder's bytes.
 */
export function readerBuilder(points: number, nnz: number, labels: number, opts: StreamOptions, memory: ReadMemory): CsrBuilder {
  const limit = memory.limit;
  const want = 8 * (points + 1) + 8 * nnz + 4 * labels;
  const room = Math.max(0, limit - memory.buffers);
  const f = want > room / 2 ? room / 2 / want : 1;
  const b = new CsrBuilder(points * f, nnz * f, labels * f);
  if (opts.maxMemoryBytes !== undefined) {
    b.byteLimit = limit;
    b.byteLimitLabel = `the memory limit of ${mb(limit)}`;
    b.otherBytes = { bytes: () => memory.buffers, name: 'read buffers' };
  }
  memory.data = () => b.bytes();
  return b;
}

/** Receives complete lines: buf[start, end) with buf[end - 1] === '\n' (or start === end). */
export type ChunkSink = (buf: Uint8Array, start: number, end: number, consumed: number, total: number, eof: boolean) => void;

/**
 * Reads `path` in chunks and hands each run of complete lines to `sink`. A partial line at the end of a
 * chunk is carried over to the next read; an unterminated last line gets a '\n' appended; a UTF-8 byte
 * order mark at the start is skipped. `consumed` counts the bytes handed to the sink so far.
 * Double-buffered: the next chunk is read (in libuv's thread pool) while the sink parses the current one,
 * so parsing never waits for the disk when the disk keeps up.
 */
export async function streamLines(path: string, sink: ChunkSink, opts: StreamOptions = {}, memory = new ReadMemory(opts)): Promise<void> {
  let chunk = Math.max(16, Math.floor(opts.chunkBytes ?? CHUNK_BYTES));
  const maxLine = opts.maxLineBytes ?? MAX_LINE_BYTES;
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (e) {
    // Node's message ("ENOENT: no such file or directory, open 'x'") made readable; code and path kept.
    const err = e as NodeJS.ErrnoException;
    throw Object.assign(new Error(`cannot read ${path}: ${fsErrorReason(err)}`, { cause: e }), { code: err.code, errno: err.errno, syscall: err.syscall, path });
  }
  let inFlight: Promise<unknown> | undefined;
  try {
    const st = await fh.stat();
    // Reading a directory fails with an EISDIR that names no path: say which one.
    if (st.isDirectory()) throw Object.assign(new Error(`EISDIR: illegal operation on a directory, read '${path}'`), { code: 'EISDIR', path });
    const total = st.size;
    // A regular file smaller than a chunk needs buffers of its size only (more reads follow if it grows).
    const regular = st.isFile();
    if (regular && total > 0) chunk = Math.min(chunk, Math.max(16, total));
    // One spare byte in each buffer for the '\n' appended to an unterminated last line.
    memory.setBuffers(2 * (chunk + 1));
    let cur = Buffer.allocUnsafe(chunk + 1);
    let nxt = Buffer.allocUnsafe(chunk + 1);
    let filled = 0, readTotal = 0, consumed = 0, start = 0;
    let eof = false, bomChecked = false;
    for (;;) {
      // 1. Read until cur holds at least one complete line, or the rest of the file.
      let lineEnd = 0;
      for (;;) {
        if (!bomChecked && (filled >= 3 || eof)) {
          bomChecked = true;
          if (filled >= 3 && cur[0] === 0xef && cur[1] === 0xbb && cur[2] === 0xbf) start = consumed = 3;
        }
        if (bomChecked) {
          if (eof) {
            lineEnd = filled;
            if (filled > start && cur[filled - 1] !== NL) cur[lineEnd++] = NL;
            break;
          }
          if (filled > start) lineEnd = cur.lastIndexOf(NL, filled - 1) + 1;
          if (lineEnd > start) break;
        }
        if (filled === cur.length - 1) {
          // A single line longer than the buffer: grow it, up to the longest line allowed.
          if (filled - start > maxLine) throw new LineTooLongError(maxLine);
          const size = Math.min((cur.length - 1) * 2, start + maxLine + chunk) + 1;
          // While it is copied the old buffer is alive too.
          memory.setBuffers(cur.length + size + nxt.length, filled - start);
          const bigger = Buffer.allocUnsafe(size);
          cur.copy(bigger, 0, 0, filled);
          cur = bigger;
          memory.setBuffers(cur.length + nxt.length);
        }
        const { bytesRead } = await fh.read(cur, filled, cur.length - 1 - filled, null);
        if (bytesRead === 0) eof = true;
        filled += bytesRead;
        readTotal += bytesRead;
      }
      // 2. Start reading the next chunk behind the carried-over partial line, then parse this one.
      let next: Promise<{ bytesRead: number }> | undefined;
      const leftover = filled - lineEnd;
      if (!eof) {
        // Room behind the carried-over line for a chunk (a regular file: for what is left of it, if less).
        if (nxt.length - 1 - leftover < (regular ? Math.min(chunk, Math.max(16, total - readTotal)) : chunk)) {
          memory.setBuffers(cur.length + nxt.length + leftover + chunk + 1, leftover);
          nxt = Buffer.allocUnsafe(leftover + chunk + 1);
          memory.setBuffers(cur.length + nxt.length);
        }
        cur.copy(nxt, 0, lineEnd, filled);
        next = fh.read(nxt, leftover, nxt.length - 1 - leftover, null);
        inFlight = next;
        next.catch(() => {}); // if the sink throws first, the finally block waits for this read
      }
      consumed += Math.min(lineEnd, filled) - start;
      sink(cur, start, lineEnd, consumed, total, eof);
      opts.onProgress?.(readTotal, total);
      if (!next) return;
      const { bytesRead } = await next;
      inFlight = undefined;
      if (bytesRead === 0) eof = true;
      readTotal += bytesRead;
      [cur, nxt] = [nxt, cur];
      filled = leftover + bytesRead;
      start = 0;
    }
  } finally {
    if (inFlight) await inFlight.catch(() => {});
    await fh.close();
  }
}
