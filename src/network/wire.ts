// Tasks cross into worker threads by postMessage (structured clone), which shares a SharedArrayBuffer but
// writes a typed array's length modulo 2^32 bytes (checked on Node 20: a Uint32Array of 2^30 + 64
// elements arrives with 64). A network with an array of 4 GiB or more (e.g. a 1024-wide layer over 10^6
// features) would then reach the workers truncated. `toWire` replaces every such view by its buffer,
// offset and length (the buffer itself keeps its full size), and `fromWire` rebuilds it in the worker;
// views under 4 GiB, and tasks that hold none, pass unchanged (no copy).

const TAG = '__sublinearView';
const LIMIT = 2 ** 32;

type ViewKind = 'Uint8Array' | 'Int32Array' | 'Uint32Array' | 'Float32Array' | 'Float64Array';
const CTORS = { Uint8Array, Int32Array, Uint32Array, Float32Array, Float64Array } as const;

interface WireView {
  [TAG]: ViewKind;
  buffer: ArrayBufferLike;
  byteOffset: number;
  length: number;
}

/** `value` with every typed array of 4 GiB or more replaced by a descriptor (the same object if none). */
export function toWire<T>(value: T): T {
  return encode(value) as T;
}

/** Undoes toWire (the same object if it holds no descriptor). */
export function fromWire<T>(value: T): T {
  return decode(value) as T;
}

function encode(v: unknown): unknown {
  if (ArrayBuffer.isView(v)) {
    if (v.byteLength < LIMIT) return v;
    const kind = v.constructor.name as ViewKind;
    if (!(kind in CTORS)) throw new Error(`a ${kind} of ${v.byteLength} bytes cannot be sent to a worker thread`);
    const w: WireView = { [TAG]: kind, buffer: v.buffer, byteOffset: v.byteOffset, length: (v as unknown as { length: number }).length };
    return w;
  }
  return mapChildren(v, encode);
}

function decode(v: unknown): unknown {
  if (v !== null && typeof v === 'object' && TAG in v) {
    const w = v as WireView;
    return new CTORS[w[TAG]](w.buffer as ArrayBuffer, w.byteOffset, w.length);
  }
  return mapChildren(v, decode);
}

/** Applies `f` to the children of a plain object or array; returns `v` itself when no child changed. */
function mapChildren(v: unknown, f: (x: unknown) => unknown): unknown {
  if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v) || v instanceof ArrayBuffer || v instanceof SharedArrayBuffer) return v;
  if (Array.isArray(v)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const c = f(v[i]);
      if (c !== v[i]) (out ??= v.slice())[i] = c;
    }
    return out ?? v;
  }
  if (Object.getPrototypeOf(v) !== Object.prototype) return v;
  let out: Record<string, unknown> | null = null;
  for (const [k, x] of Object.entries(v)) {
    const c = f(x);
    if (c !== x) (out ??= { ...(v as Record<string, unknown>) })[k] = c;
  }
  return out ?? v;
}
