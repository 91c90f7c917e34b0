// The container of sublinear models and checkpoints: a versioned, checksummed file of named typed-array
// sections plus a JSON header, written atomically and streamed in both directions, so that a 1+ GB
// network is never copied into one big buffer.
//
// Layout (all integers little-endian):
//   [0, 8)        magic "SUBLIN01" (identifies the file family; it never changes, the version does)
//   [8, 12)       format version, u32 (BINFILE_VERSION)
//   [12, 16)      header length H in bytes, u32
//   [16, 16+H)    header: UTF-8 JSON { kind, sections: [{ name, dtype, length, byteOffset }], meta }
//   ...           zero padding to a multiple of 8 (the data start)
//   sections      raw little-endian element bytes, each starting at its absolute `byteOffset` (a multiple
//                 of 8, in table order, not overlapping), each followed by zero padding to a multiple of 8
//   trailer       u64 total file length, then u64 xxhash64 (seed 0) of every byte before the hash
// Absolute offsets let other tools map a section directly, e.g. numpy:
//   np.memmap(path, dtype='<f4', mode='r', offset=byteOffset, shape=(length,)).
//
// Reading is single-pass: the checksum is computed while sections are read into their destination
// arrays, and a mismatch is reported at the end. Structural problems found before that (a header that
// does not parse, sizes that disagree with the file) are first checked against the checksum, so that
// corruption is reported as corruption and a specific message is only given for a file whose bytes are
// intact (or whose end is missing: truncation).
import { open, type FileHandle } from 'node:fs/promises';
import xxhash from 'xxhash-wasm';
import { writeFileAtomic, type AtomicWriteOptions } from './atomic-write.js';
import { boundJson, boundText } from './bounded-text.js';

/** The 8 magic bytes at the start of every sublinear binary file. */
export const BINFILE_MAGIC = 'SUBLIN01';
/** Format version written by this build; files with a larger version are refused. */
export const BINFILE_VERSION = 1;
/** Largest accepted JSON header (64 MiB). Bulk data belongs in sections, not in `meta`. */
export const MAX_HEADER_BYTES = 64 * 1024 * 1024;
/**
 * Most JSON values (objects, arrays and the items inside them) a header may hold: 2^20. Parsing costs
 * memory per value, not per byte: a 64 MiB header of `{},{},...` takes 25 s and 2 GB to parse, so a
 * crafted header is refused by this count, taken by a byte scan, before JSON.parse. Real headers hold a
 * few hundred values.
 */
export const MAX_HEADER_VALUES = 1 << 20;
/** Deepest nesting of objects and arrays in a header (real headers nest about 6 levels). */
export const MAX_HEADER_DEPTH = 256;

const MAGIC_BYTES = new TextEncoder().encode(BINFILE_MAGIC);
const PREFIX_BYTES = 16;
const TRAILER_BYTES = 16;
const DEFAULT_CHUNK = 8 * 1024 * 1024;

/** What a file holds: a trained model, or a training checkpoint (model plus optimiser/schedule state). */
export type BinKind = 'model' | 'checkpoint';
/** Element type of a section. */
export type SectionDtype = 'f32' | 'u32' | 'i32' | 'u8' | 'f64';
/** Typed arrays a section can be read from or into. */
export type SectionArray = Float32Array | Uint32Array | Int32Array | Uint8Array | Float64Array;

/** One entry of the header's section table. */
export interface SectionInfo {
  name: string;
  dtype: SectionDtype;
  /** Number of elements. */
  length: number;
  /** Absolute file offset of the first byte (a multiple of 8). */
  byteOffset: number;
}

/**
 * A section whose bytes are produced while the file is written (a model gathered from the ranks of a
 * label-sharded job round by round, never whole in one process): its dtype and element count, and its bytes
 * in order, `length` elements in all (writeBinFile checks the count). A chunk must stay unchanged until the
 * generator is resumed (it is written by then).
 */
export interface SectionStream {
  dtype: SectionDtype;
  length: number;
  chunks(): AsyncIterable<Uint8Array>;
}

const DTYPE_BYTES: Record<SectionDtype, number> = { f32: 4, u32: 4, i32: 4, u8: 1, f64: 8 };

/** What `writeBinFile` stores. */
export interface BinFileContents<M = unknown> {
  kind: BinKind;
  /**
   * Free-form JSON metadata (config, hash seeds, data paths, RNG state, schedule state...). Must survive
   * JSON.stringify: store BigInts (e.g. splitmix64 state) as decimal strings. Default null.
   */
  meta?: M;
  /** Named arrays (plain or SharedArrayBuffer-backed) or streams (writeBinFile only), stored in key order. */
  sections: Record<string, SectionArray | SectionStream>;
}

/** A file read by `readBinFile`. */
export interface BinFile<M = unknown> {
  version: number;
  kind: BinKind;
  meta: M;
  /** Every section of the file: the caller's `into` arrays, and fresh arrays for the others. */
  sections: Record<string, SectionArray>;
  /** The header's section table, in file order. */
  table: SectionInfo[];
}

/** Options of `writeBinFile`. */
export interface WriteBinFileOptions extends AtomicWriteOptions {
  /** Bytes copied, hashed and written per step when streaming a section. Default 8 MiB. */
  chunkBytes?: number;
}

/** Options of `readBinFile`. */
export interface ReadBinFileOptions {
  /** Refuse files of another kind (e.g. a checkpoint given where a model is expected). Default: any kind. */
  kind?: BinKind;
  /**
   * Destination arrays for some sections, by name: each must exist in the file with the same dtype and
   * length, and is filled in place (e.g. a network's SharedArrayBuffer weights). If reading fails after
   * the sections started streaming (checksum mismatch), their contents are unspecified. Default: none.
   */
  into?: Record<string, SectionArray>;
  /** Allocate the sections not given in `into` on SharedArrayBuffers (for worker threads). Default false. */
  shared?: boolean;
  /** Bytes read per step. Default 8 MiB. */
  chunkBytes?: number;
  /**
   * Stop after the header: return kind, meta and the section table (sections is `{}`, `into` is ignored),
   * e.g. to allocate a network from its config before streaming the weights into it. The structure and
   * the file size are checked, but the checksum is not (that needs every byte): do the full read before
   * trusting any of it. Default false.
   */
  headerOnly?: boolean;
}

/** Why a file was refused. `message` always starts with the path, e.g. `model.bin: checksum mismatch ...`. */
export type BinFileProblem = 'bad-magic' | 'version' | 'truncated' | 'size' | 'checksum' | 'header' | 'kind' | 'into';

/**
 * Error thrown by `readBinFile` for a file it cannot accept (a damaged or truncated model or checkpoint file,
 * or one that is not sublinear's); other I/O errors (ENOENT...) pass through.
 *
 * @example
 * ```ts
 * try { await Network.load('model.sl'); }
 * catch (e) { if (e instanceof BinFileError) console.error(`damaged: ${e.message}`); else throw e; }
 * ```
 */
export class BinFileError extends Error {
  override name = 'BinFileError';
  constructor(
    readonly path: string,
    readonly problem: BinFileProblem,
    detail: string,
  ) {
    super(`${path}: ${detail}`);
  }
}

const DTYPES: Record<SectionDtype, { bytes: number; ctor: new (buffer: ArrayBufferLike, byteOffset?: number, length?: number) => SectionArray }> = {
  f32: { bytes: 4, ctor: Float32Array },
  u32: { bytes: 4, ctor: Uint32Array },
  i32: { bytes: 4, ctor: Int32Array },
  u8: { bytes: 1, ctor: Uint8Array },
  f64: { bytes: 8, ctor: Float64Array },
};

function isStream(a: unknown): a is SectionStream {
  return typeof a === 'object' && a !== null && typeof (a as SectionStream).chunks === 'function';
}

function dtypeOf(a: unknown): SectionDtype | null {
  // Exact constructor checks: a Buffer is a Uint8Array subclass and is accepted as u8; Uint8ClampedArray is not.
  if (a instanceof Float32Array) return 'f32';
  if (a instanceof Uint32Array) return 'u32';
  if (a instanceof Int32Array) return 'i32';
  if (a instanceof Float64Array) return 'f64';
  if (a instanceof Uint8Array) return 'u8';
  return null;
}

const align8 = (n: number): number => Math.ceil(n / 8) * 8;

// Sections are stored little-endian and copied without conversion.
function assertLittleEndian(): void {
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {
    throw new Error('sublinear binary files are little-endian; big-endian hosts are not supported');
  }
}

let hasherApi: ReturnType<typeof xxhash> | undefined;
function hashApi(): ReturnType<typeof xxhash> {
  return (hasherApi ??= xxhash());
}

/**
 * Writes a model or checkpoint to `path` atomically (see writeFileAtomic) and returns the file size.
 *
 * Sections are streamed from the arrays in `chunkBytes` steps: each step is copied into one reused
 * scratch buffer, hashed and written from that copy, so memory use stays at one chunk whatever the
 * model size, and the checksum always matches the bytes on disk even if worker threads are still
 * writing to SharedArrayBuffer-backed arrays (the snapshot is then not consistent across chunks, but
 * the file is valid).
 *
 * @example
 * ```ts
 * await writeBinFile('model.bin', {
 *   kind: 'model',
 *   meta: { config, seed: 1, trainPoints: 490449 },
 *   sections: { 'layer0.weights': w0, 'layer0.bias': b0, labelFreq },
 * });
 * const { meta, sections } = await readBinFile('model.bin', { kind: 'model', into: { 'layer0.weights': w0 } });
 * ```
 */
export async function writeBinFile(path: string, contents: BinFileContents, options: WriteBinFileOptions = {}): Promise<number> {
  assertLittleEndian();
  const where = `writeBinFile(${path})`;
  const { kind, sections } = contents;
  if (kind !== 'model' && kind !== 'checkpoint') {
    throw new Error(`${where}: expected kind 'model' or 'checkpoint' but received ${JSON.stringify(kind)}`);
  }
  if (sections === null || typeof sections !== 'object') throw new Error(`${where}: expected a record of typed arrays for sections`);
  const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK;
  if (!Number.isInteger(chunkBytes) || chunkBytes < 8) {
    throw new Error(`Expected integer >= 8 for chunkBytes but received ${chunkBytes}`);
  }
  const names = Object.keys(sections);
  const arrays: (SectionArray | SectionStream)[] = [];
  const dtypes: SectionDtype[] = [];
  const byteLengths: number[] = [];
  for (const name of names) {
    if (name.length === 0) throw new Error(`${where}: section names must not be empty`);
    const a = sections[name];
    if (isStream(a)) {
      if (!(a.dtype in DTYPE_BYTES) || !Number.isSafeInteger(a.length) || a.length < 0) throw new Error(`${where}: section "${name}" is a stream without a valid dtype and length`);
      arrays.push(a);
      dtypes.push(a.dtype);
      byteLengths.push(a.length * DTYPE_BYTES[a.dtype]);
      continue;
    }
    const dt = dtypeOf(a);
    if (!dt) {
      const got = a === null || a === undefined ? String(a) : ((a as object).constructor?.name ?? typeof a);
      throw new Error(`${where}: expected a Float32Array, Float64Array, Uint32Array, Int32Array or Uint8Array for section "${name}" but received ${got}`);
    }
    arrays.push(a!);
    dtypes.push(dt);
    byteLengths.push(a!.byteLength);
  }

  // Offsets are absolute, so they depend on the header length, which depends on the offsets' digits:
  // iterate to the fixed point (dataStart only grows, so this ends after a few rounds).
  let dataStart = 0;
  let headerBytes: Uint8Array;
  let table: SectionInfo[];
  for (;;) {
    let pos = dataStart;
    table = names.map((name, i) => {
      const info: SectionInfo = { name, dtype: dtypes[i]!, length: arrays[i]!.length, byteOffset: pos };
      pos = align8(pos + byteLengths[i]!);
      return info;
    });
    let json: string;
    try {
      json = JSON.stringify({ kind, sections: table, meta: contents.meta ?? null });
    } catch (e) {
      throw new Error(`${where}: meta is not JSON-serializable (${(e as Error).message})`, { cause: e });
    }
    headerBytes = new TextEncoder().encode(json);
    if (headerBytes.length > MAX_HEADER_BYTES) {
      throw new Error(`${where}: the JSON header is ${headerBytes.length} bytes, over the ${MAX_HEADER_BYTES}-byte limit; store bulk data as sections`);
    }
    const tooCostly = jsonProblem(headerBytes);
    if (tooCostly) throw new Error(`${where}: the JSON header holds ${tooCostly}; store bulk data as sections`);
    const next = align8(PREFIX_BYTES + headerBytes.length);
    if (next === dataStart) break;
    dataStart = next;
  }
  const last = table[table.length - 1];
  const dataEnd = last ? align8(last.byteOffset + byteLengths[byteLengths.length - 1]!) : dataStart;
  const totalBytes = dataEnd + TRAILER_BYTES;

  const hasher = (await hashApi()).create64(0n);
  const zeros = new Uint8Array(8);
  const scratch = new Uint8Array(Math.min(chunkBytes, Math.max(8, ...byteLengths)));

  async function* chunks(): AsyncGenerator<Uint8Array> {
    const head = new Uint8Array(dataStart);
    head.set(MAGIC_BYTES, 0);
    const hv = new DataView(head.buffer);
    hv.setUint32(8, BINFILE_VERSION, true);
    hv.setUint32(12, headerBytes.length, true);
    head.set(headerBytes, PREFIX_BYTES);
    hasher.update(head);
    yield head;
    for (let s = 0; s < arrays.length; s++) {
      const a = arrays[s]!;
      if (isStream(a)) {
        let n = 0;
        for await (const c of a.chunks()) {
          n += c.byteLength;
          if (n > byteLengths[s]!) throw new Error(`${where}: section "${names[s]}" streamed more than its ${byteLengths[s]} bytes`);
          hasher.update(c);
          yield c;
        }
        if (n !== byteLengths[s]) throw new Error(`${where}: section "${names[s]}" streamed ${n} bytes, expected ${byteLengths[s]}`);
      }
      else {
        const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
        for (let off = 0; off < bytes.length; off += scratch.length) {
          const n = Math.min(scratch.length, bytes.length - off);
          scratch.set(bytes.subarray(off, off + n));
          const c = scratch.subarray(0, n);
          hasher.update(c);
          yield c; // written before the generator resumes, so the scratch buffer can be reused
        }
      }
      const pad = align8(byteLengths[s]!) - byteLengths[s]!;
      if (pad > 0) {
        const z = zeros.subarray(0, pad);
        hasher.update(z);
        yield z;
      }
    }
    const tail = new Uint8Array(TRAILER_BYTES);
    const tv = new DataView(tail.buffer);
    tv.setBigUint64(0, BigInt(totalBytes), true);
    hasher.update(tail.subarray(0, 8));
    tv.setBigUint64(8, hasher.digest(), true);
    yield tail;
  }

  const written = await writeFileAtomic(path, chunks(), options);
  if (written !== totalBytes) throw new Error(`${where}: internal error: wrote ${written} bytes, expected ${totalBytes}`);
  return written;
}

/**
 * Reads and verifies a file written by `writeBinFile`.
 *
 * Checks, in order: magic, version (newer versions are refused with a message naming both), header
 * length and JSON, the section table (known dtypes, aligned, in order, inside the file), the file size
 * against the table (truncation), the trailer, the requested kind and `into` shapes, and finally the
 * xxhash64 checksum, computed while the sections stream into their arrays. Nothing large is allocated
 * before the file's size has confirmed the table, so a corrupt header cannot cause a huge allocation.
 * Problems with the file throw BinFileError whose message starts with the path.
 */
export async function readBinFile<M = unknown>(path: string, options: ReadBinFileOptions = {}): Promise<BinFile<M>> {
  assertLittleEndian();
  const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK;
  if (!Number.isInteger(chunkBytes) || chunkBytes < 8) {
    throw new Error(`Expected integer >= 8 for chunkBytes but received ${chunkBytes}`);
  }
  if (options.kind !== undefined && options.kind !== 'model' && options.kind !== 'checkpoint') {
    throw new Error(`Expected kind 'model' or 'checkpoint' but received ${JSON.stringify(options.kind)}`);
  }
  const fail = (problem: BinFileProblem, detail: string) => new BinFileError(path, problem, detail);
  const fh = await open(path, 'r');
  try {
    const size = (await fh.stat()).size;
    const reader = new Reader(fh, path, chunkBytes);
    const prefix = await reader.read(0, Math.min(size, PREFIX_BYTES));
    const m = Math.min(size, 8);
    for (let i = 0; i < m; i++) if (prefix[i] !== MAGIC_BYTES[i]) throw fail('bad-magic', 'not a sublinear file (bad magic)');
    const minSize = PREFIX_BYTES + TRAILER_BYTES;
    if (size < PREFIX_BYTES) throw fail('truncated', `truncated: expected at least ${minSize} bytes, found ${size}`);
    const pv = new DataView(prefix.buffer, prefix.byteOffset, prefix.byteLength);
    const version = pv.getUint32(8, true);
    // The version is checked before anything else is interpreted: a newer format may lay out (and
    // checksum) the rest differently.
    if (version > BINFILE_VERSION) throw fail('version', `format version ${version} is newer than this sublinear (${BINFILE_VERSION})`);
    if (version < 1) throw fail('version', `unsupported format version ${version}`);

    // From here on, a problem may be corruption anywhere in the file; `structural` decides what to say.
    const structural = (problem: BinFileProblem, detail: string) => reader.diagnose(size, fail(problem, detail));
    const headerLength = pv.getUint32(12, true);
    if (headerLength > MAX_HEADER_BYTES) {
      throw await structural('header', `corrupt header: declared length ${headerLength} bytes exceeds the ${MAX_HEADER_BYTES}-byte limit`);
    }
    const dataStart = align8(PREFIX_BYTES + headerLength);
    if (size < dataStart + TRAILER_BYTES) {
      throw await structural('truncated', `truncated: expected at least ${dataStart + TRAILER_BYTES} bytes, found ${size}`);
    }
    const headRegion = await reader.read(0, dataStart);
    const tooCostly = jsonProblem(headRegion.subarray(PREFIX_BYTES, PREFIX_BYTES + headerLength));
    if (tooCostly) throw await structural('header', `corrupt header: ${tooCostly}`);
    let header: unknown;
    try {
      header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(headRegion.subarray(PREFIX_BYTES, PREFIX_BYTES + headerLength)));
    } catch {
      throw await structural('header', 'corrupt header: not valid UTF-8 JSON');
    }
    const parsed = parseHeader(header, dataStart);
    if (typeof parsed === 'string') throw await structural('header', `corrupt header: ${parsed}`);
    const { kind, table, meta, dataEnd } = parsed;
    const expected = dataEnd + TRAILER_BYTES;
    if (size < expected) throw await structural('truncated', `truncated: expected ${expected} bytes, found ${size}`);
    if (size > expected) throw await structural('size', `size mismatch: expected ${expected} bytes, found ${size} (file is corrupt)`);

    const trailer = await reader.read(dataEnd, TRAILER_BYTES);
    const tv = new DataView(trailer.buffer, trailer.byteOffset, TRAILER_BYTES);
    // The header agrees with the file size, so a different stored length means a damaged trailer.
    if (tv.getBigUint64(0, true) !== BigInt(size)) throw fail('checksum', 'checksum mismatch (file is corrupt or truncated)');
    const storedHash = tv.getBigUint64(8, true);

    if (options.kind && kind !== options.kind) throw fail('kind', `expected a ${options.kind} file but this is a ${kind}`);
    if (options.headerOnly) return { version, kind, meta: meta as M, sections: {}, table };
    const into = options.into ?? {};
    const byName = new Map(table.map((s) => [s.name, s]));
    for (const [name, dest] of Object.entries(into)) {
      const info = byName.get(name);
      if (!info) throw fail('into', `has no section "${name}"`);
      const dt = dtypeOf(dest);
      if (dt !== info.dtype) {
        const got = dest === null || dest === undefined ? String(dest) : ((dest as object).constructor?.name ?? typeof dest);
        throw fail('into', `section "${name}" is ${info.dtype} but the destination is a ${got}`);
      }
      if (dest.length !== info.length) {
        throw fail('into', `section "${name}" has ${info.length} elements but the destination has ${dest.length}`);
      }
    }

    // Sizes are confirmed by the file itself: allocating now is bounded by the file size.
    const sections: Record<string, SectionArray> = {};
    for (const info of table) {
      const d = DTYPES[info.dtype];
      sections[info.name] =
        into[info.name] ??
        (options.shared ? new d.ctor(new SharedArrayBuffer(info.length * d.bytes), 0, info.length) : new d.ctor(new ArrayBuffer(info.length * d.bytes), 0, info.length));
    }

    const hasher = (await hashApi()).create64(0n);
    hasher.update(headRegion);
    let pos = dataStart;
    for (const info of table) {
      if (info.byteOffset > pos) await reader.hashRange(hasher, pos, info.byteOffset);
      const a = sections[info.name]!;
      const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
      for (let off = 0; off < bytes.length; off += chunkBytes) {
        const view = bytes.subarray(off, Math.min(bytes.length, off + chunkBytes));
        await reader.readInto(view, info.byteOffset + off);
        hasher.update(view);
      }
      pos = info.byteOffset + bytes.length;
    }
    await reader.hashRange(hasher, pos, dataEnd);
    hasher.update(trailer.subarray(0, 8));
    if (hasher.digest() !== storedHash) throw fail('checksum', 'checksum mismatch (file is corrupt or truncated)');
    return { version, kind, meta: meta as M, sections, table };
  } finally {
    await fh.close();
  }
}

/**
 * Why the JSON text in `bytes` is too costly to parse, or null: more than MAX_HEADER_VALUES values
 * (counted as the objects and arrays opened plus the separators outside strings: an upper bound on what
 * JSON.parse would build), or nesting deeper than MAX_HEADER_DEPTH (recursive code such as
 * JSON.stringify would overflow the stack on it). One pass, nothing allocated; malformed text is counted
 * the same way (JSON.parse then refuses it).
 */
function jsonProblem(bytes: Uint8Array): string | null {
  let count = 0, depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b || c === 0x2c) {
      // '{', '[', ','
      if (++count > MAX_HEADER_VALUES) return `more than ${MAX_HEADER_VALUES} JSON values`;
      if (c !== 0x2c && ++depth > MAX_HEADER_DEPTH) return `JSON nested deeper than ${MAX_HEADER_DEPTH} levels`;
    } else if (c === 0x7d || c === 0x5d) depth--; // '}', ']'
  }
  return null;
}

interface ParsedHeader {
  kind: BinKind;
  table: SectionInfo[];
  meta: unknown;
  dataEnd: number;
}

/** Validates the header object; returns a description of the first problem instead of throwing. */
function parseHeader(h: unknown, dataStart: number): ParsedHeader | string {
  if (h === null || typeof h !== 'object' || Array.isArray(h)) return 'expected a JSON object';
  const o = h as Record<string, unknown>;
  if (o.kind !== 'model' && o.kind !== 'checkpoint') return `unknown kind ${boundJson(o.kind)}`;
  if (!Array.isArray(o.sections)) return 'missing section table';
  const table: SectionInfo[] = [];
  const seen = new Set<string>();
  let end = dataStart;
  for (let i = 0; i < o.sections.length; i++) {
    const s = o.sections[i] as Record<string, unknown> | null;
    if (s === null || typeof s !== 'object') return `section ${i} is not an object`;
    const { name, dtype, length, byteOffset } = s;
    if (typeof name !== 'string' || name.length === 0) return `section ${i} has no name`;
    const shown = boundText(name);
    if (seen.has(name)) return `duplicate section "${shown}"`;
    seen.add(name);
    if (typeof dtype !== 'string' || !Object.hasOwn(DTYPES, dtype)) return `section "${shown}" has unknown dtype ${boundJson(dtype)}`;
    if (typeof length !== 'number' || !Number.isSafeInteger(length) || length < 0) return `section "${shown}" has invalid length ${boundJson(length)}`;
    if (typeof byteOffset !== 'number' || !Number.isSafeInteger(byteOffset) || byteOffset % 8 !== 0) {
      return `section "${shown}" has invalid byteOffset ${boundJson(byteOffset)}`;
    }
    if (byteOffset < end) return `section "${shown}" at byte ${byteOffset} overlaps the data before it (which ends at ${end})`;
    const byteLength = length * DTYPES[dtype as SectionDtype].bytes;
    if (!Number.isSafeInteger(byteOffset + byteLength + 8 + TRAILER_BYTES)) return `section "${shown}" is too large`;
    end = align8(byteOffset + byteLength);
    table.push({ name, dtype: dtype as SectionDtype, length, byteOffset });
  }
  return { kind: o.kind, table, meta: o.meta ?? null, dataEnd: end };
}

/** Positional reads that always fill their buffer, plus the checksum helpers. */
class Reader {
  private scratch: Uint8Array | undefined;
  constructor(
    private fh: FileHandle,
    private path: string,
    private chunkBytes: number,
  ) {}

  async read(position: number, length: number): Promise<Uint8Array> {
    const buf = new Uint8Array(length);
    await this.readInto(buf, position);
    return buf;
  }

  async readInto(view: Uint8Array, position: number): Promise<void> {
    let off = 0;
    while (off < view.length) {
      const { bytesRead } = await this.fh.read(view, off, view.length - off, position + off);
      if (bytesRead === 0) {
        throw new BinFileError(this.path, 'truncated', `truncated: the file ended at byte ${position + off} while reading (was it modified during the read?)`);
      }
      off += bytesRead;
    }
  }

  async hashRange(hasher: { update(b: Uint8Array): unknown }, from: number, to: number): Promise<void> {
    // Grow the scratch buffer on demand (padding gaps are tiny; a whole-file diagnose is not).
    if (!this.scratch || (this.scratch.length < this.chunkBytes && this.scratch.length < to - from)) {
      this.scratch = new Uint8Array(Math.min(this.chunkBytes, Math.max(8, to - from)));
    }
    const scratch = this.scratch;
    for (let p = from; p < to; ) {
      const n = Math.min(scratch.length, to - p);
      const view = scratch.subarray(0, n);
      await this.readInto(view, p);
      hasher.update(view);
      p += n;
    }
  }

  /**
   * Chooses the error to report for a structural problem. If the trailer at the end of the file claims
   * this exact file size, the file's end is intact and the checksum can be verified: a mismatch means the
   * bytes were damaged (and the structural detail is a symptom), a match means the file really is
   * malformed as described. Otherwise the end of the file is missing or damaged and the structural
   * message (typically "truncated") is the best description.
   */
  async diagnose(size: number, structural: BinFileError): Promise<BinFileError> {
    if (size < PREFIX_BYTES + TRAILER_BYTES) return structural;
    const trailer = await this.read(size - TRAILER_BYTES, TRAILER_BYTES);
    const tv = new DataView(trailer.buffer);
    if (tv.getBigUint64(0, true) !== BigInt(size)) return structural;
    const hasher = (await hashApi()).create64(0n);
    await this.hashRange(hasher, 0, size - 8);
    if (hasher.digest() !== tv.getBigUint64(8, true)) {
      return new BinFileError(this.path, 'checksum', 'checksum mismatch (file is corrupt or truncated)');
    }
    return structural;
  }
}
