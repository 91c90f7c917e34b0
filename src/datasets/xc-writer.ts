// Writer for the Extreme Classification Repository text format (see xc-reader.ts).
//
// Values are float32 in memory, so each is printed with the fewest significant digits that read back as
// the same float32 (`1` for 1.0, `0.1` for Math.fround(0.1)): files stay small and write -> read is exact.
// Output is produced into one reusable byte buffer (no per-row strings) and written atomically through
// src/util/atomic-write.ts: a temporary file next to the target, fsync, rename. A crash never leaves a
// half-written file under the target name.
import { writeFileAtomic } from '../util/atomic-write.js';
import type { SparseDataset } from './csr.js';

/** Options of `writeXC`. */
export interface WriteXCOptions {
  /**
   * fsync the file before renaming it into place. Default true. Off keeps atomicity against process
   * crashes but not power loss; for scratch files and tests.
   */
  fsync?: boolean;
  /** Called every few thousand rows with (rows written, total rows). Default: none. */
  onProgress?: (rows: number, totalRows: number) => void;
}

/** Bytes after which the buffer is handed to the file (rows are never split, so a chunk can be larger). */
const FLUSH_BYTES = 4 * 1024 * 1024;

/**
 * Writes `dataset` to `path` in XC format, atomically. Returns the number of bytes written.
 * Rows are written as stored (ids are expected increasing, as every reader of this package produces).
 *
 * @example
 * ```ts
 * await writeXC('tiny.txt', synthesize({ shape: 'tiny', points: 100 }));
 * ```
 */
export async function writeXC(path: string, dataset: SparseDataset, opts: WriteXCOptions = {}): Promise<number> {
  checkShape(dataset);
  const d = dataset;
  async function* chunks(): AsyncGenerator<Uint8Array> {
    const enc = new XCEncoder();
    enc.header(d.points, d.features, d.labels);
    for (let i = 0; i < d.points; i++) {
      enc.row(d.labelIndices, d.labelOffsets[i]!, d.labelOffsets[i + 1]!, d.indices, d.values, d.offsets[i]!, d.offsets[i + 1]!);
      if (enc.length >= FLUSH_BYTES) {
        yield enc.bytes();
        enc.clear();
        opts.onProgress?.(i + 1, d.points);
      }
    }
    yield enc.bytes();
    opts.onProgress?.(d.points, d.points);
  }
  return writeFileAtomic(path, chunks(), { fsync: opts.fsync ?? true });
}

/**
 * Encodes XC lines into a growable byte buffer. `bytes()` returns a view that is valid until the next
 * call that writes; producers yield it, wait for it to be written, then `clear()`.
 */
export class XCEncoder {
  private buf: Buffer;
  private pos = 0;

  constructor(initialBytes = FLUSH_BYTES + (1 << 16)) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  /** Bytes encoded since the last clear(). */
  get length(): number {
    return this.pos;
  }

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  clear(): void {
    this.pos = 0;
  }

  /** Writes the `N D L` header line. */
  header(points: number, features: number, labels: number): void {
    this.text(`${points} ${features} ${labels}\n`);
  }

  /**
   * Writes one point: labels[ls, le) comma-separated, then ` id:value` for each feature in [fs, fe).
   * A point with no labels starts with a space (the format's convention), so an empty point is ` `.
   */
  row(
    labels: ArrayLike<number>, ls: number, le: number,
    ids: ArrayLike<number>, values: ArrayLike<number>, fs: number, fe: number,
  ): void {
    // Worst case per entry: 10 digits + ':' + 15-char float + ' ' (features), 10 digits + ',' (labels).
    this.ensure((le - ls) * 11 + (fe - fs) * 28 + 2);
    const buf = this.buf;
    let pos = this.pos;
    for (let i = ls; i < le; i++) {
      if (i > ls) buf[pos++] = 44; // ','
      pos = writeUint(buf, pos, labels[i]!);
    }
    if (le === ls) buf[pos++] = 32; // no labels: leading space
    for (let i = fs; i < fe; i++) {
      if (i > fs || le > ls) buf[pos++] = 32;
      pos = writeUint(buf, pos, ids[i]!);
      buf[pos++] = 58; // ':'
      pos = writeFloat32(buf, pos, values[i]!);
    }
    buf[pos++] = 10;
    this.pos = pos;
  }

  private text(s: string): void {
    this.ensure(s.length);
    this.pos += this.buf.write(s, this.pos, 'latin1');
  }

  private ensure(extra: number): void {
    if (this.pos + extra <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + extra));
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }
}

/** Exact powers of ten 1e0..1e22. */
const P10: number[] = [];
for (let i = 0, p = 1; i < 23; i++, p *= 10) P10.push(p);

/** Decimal digits of v (a Uint32) written at pos; returns the position after them. */
function writeUint(buf: Uint8Array, pos: number, v: number): number {
  const end = pos + digitCount(v);
  let p = end;
  do {
    const q = (v / 10) >>> 0;
    buf[--p] = 48 + v - q * 10;
    v = q;
  } while (v > 0);
  return end;
}

function digitCount(v: number): number {
  if (v < 10) return 1;
  if (v < 100) return 2;
  if (v < 1000) return 3;
  if (v < 10000) return 4;
  if (v < 100000) return 5;
  if (v < 1000000) return 6;
  if (v < 10000000) return 7;
  if (v < 100000000) return 8;
  if (v < 1000000000) return 9;
  return 10;
}

/**
 * The shortest decimal that reads back (through float64 then float32, as every reader here does) as the
 * same float32 as `v`. Integers below 2^24 print as integers; `-0` keeps its sign.
 */
export function formatFloat32(v: number): string {
  const end = writeFloat32(scratch, 0, v);
  return scratch.toString('latin1', 0, end);
}
const scratch = Buffer.alloc(32);

/**
 * Writes formatFloat32(v) as bytes at pos and returns the position after it (at most 15 bytes).
 *
 * Fast path: for p = 1, 2, ... significant digits, m = round(|f| * 10^k) with k = p - 1 - floor(log10|f|),
 * and the candidate m * 10^-k is checked by converting it back exactly as a parser would (m < 2^53 and
 * 10^|k| exact, so one correctly rounded operation: the same double Number() gives for the decimal).
 * Values with exponents outside that exact range use toPrecision. Either way the result is verified to
 * round-trip; 9 significant digits always do.
 */
export function writeFloat32(buf: Uint8Array, pos: number, v: number): number {
  const f = Math.fround(v);
  if (!Number.isFinite(f)) throw new RangeError(`cannot write non-finite value ${v}`);
  if (f < 0 || Object.is(f, -0)) buf[pos++] = 45; // '-'
  const a = Math.abs(f);
  if (Number.isInteger(a) && a < 16777216) return writeUint(buf, pos, a);
  const e10 = Math.floor(Math.log10(a));
  if (e10 >= -13 && e10 <= 13) {
    for (let p = 1; p <= 9; p++) {
      let k = p - 1 - e10;
      let m: number, back: number;
      if (k >= 0) {
        m = Math.round(a * P10[k]!);
        back = m / P10[k]!;
      } else {
        m = Math.round(a / P10[-k]!);
        back = m * P10[-k]!;
      }
      if (Math.fround(back) !== a) continue;
      while (k > 0 && m % 10 === 0) {
        m /= 10;
        k--;
      }
      const len = digitCount(m);
      if (k <= 0) {
        pos = writeUint(buf, pos, m);
        for (; k < 0; k++) buf[pos++] = 48;
        return pos;
      }
      if (len > k) {
        // ddd.ddd: write the digits one place to the right, then pull the integer part back over the gap.
        const end = writeUint(buf, pos + 1, m);
        const intLen = len - k;
        for (let i = 0; i < intLen; i++) buf[pos + i] = buf[pos + 1 + i]!;
        buf[pos + intLen] = 46; // '.'
        return end;
      }
      buf[pos++] = 48; // '0.000ddd'
      buf[pos++] = 46;
      for (let z = k - len; z > 0; z--) buf[pos++] = 48;
      return writeUint(buf, pos, m);
    }
  }
  // Binary search: p digits that round-trip imply p + 1 do (the nearer (p+1)-digit decimal is at least
  // as close), and p = 9 always does, so the result round-trips whatever happens.
  let lo = 1, hi = 9;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (Math.fround(Number(a.toPrecision(mid))) === a) hi = mid;
    else lo = mid + 1;
  }
  // Number -> String drops toPrecision's trailing zeros and odd exponent forms ("1.0e-7" -> "1e-7").
  const s = String(Number(a.toPrecision(lo)));
  for (let i = 0; i < s.length; i++) buf[pos++] = s.charCodeAt(i);
  return pos;
}

function checkShape(d: SparseDataset): void {
  if (d.offsets.length !== d.points + 1 || d.labelOffsets.length !== d.points + 1) {
    throw new Error(`Expected offsets and labelOffsets of length points + 1 = ${d.points + 1} but received ${d.offsets.length} and ${d.labelOffsets.length}`);
  }
  if (d.indices.length < d.offsets[d.points]! || d.values.length < d.offsets[d.points]!) {
    throw new Error(`Expected ${d.offsets[d.points]} nonzeros (offsets[points]) but indices/values hold ${d.indices.length}/${d.values.length}`);
  }
  if (d.labelIndices.length < d.labelOffsets[d.points]!) {
    throw new Error(`Expected ${d.labelOffsets[d.points]} label entries but labelIndices holds ${d.labelIndices.length}`);
  }
}
