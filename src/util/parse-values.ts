// Parsers of the values users type: integers, numbers, byte sizes ('4GB') and durations ('10m'). One
// module so that the command line (src/cli/args.ts), the benchmarks, --max-memory and checkpoint `every`
// accept the same spellings and reject the same mistakes with the same messages.
import { boundJson } from './bounded-text.js';

/** A decimal integer (optional sign, digits only: no '1e3', '0x10', '1.0' or blanks) that is a safe integer; else undefined. */
export function integerValue(text: string): number | undefined {
  if (typeof text !== 'string' || !/^[+-]?\d+$/.test(text)) return undefined;
  const v = Number(text);
  return Number.isSafeInteger(v) ? v : undefined;
}

/** A finite decimal number ('2', '-0.5', '.5', '1e-3'; no 'Infinity', '0x10' or blanks); else undefined. */
export function numberValue(text: string): number | undefined {
  if (typeof text !== 'string' || !/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) return undefined;
  const v = Number(text);
  return Number.isFinite(v) ? v : undefined;
}

/**
 * `integerValue` within inclusive bounds (default: any safe integer); undefined when `text` is not such
 * an integer or lies outside them. For lists such as `--workers 1,2`.
 */
export function parseInteger(text: string, bounds: { min?: number; max?: number } = {}): number | undefined {
  const v = integerValue(text);
  if (v === undefined) return undefined;
  if (bounds.min !== undefined && v < bounds.min) return undefined;
  if (bounds.max !== undefined && v > bounds.max) return undefined;
  return v;
}

const SIZE_UNITS: Record<string, number> = {
  '': 1, b: 1,
  k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, g: 1e9, gb: 1e9, t: 1e12, tb: 1e12,
  ki: 2 ** 10, kib: 2 ** 10, mi: 2 ** 20, mib: 2 ** 20, gi: 2 ** 30, gib: 2 ** 30, ti: 2 ** 40, tib: 2 ** 40,
};

/**
 * Parses a byte size, e.g. for --max-memory: a number (decimal or exponent form) with an optional unit,
 * case-insensitive. K, M, G, T (with or without a trailing B) are powers of 1000, like the sizes
 * sublinear prints; Ki, Mi, Gi, Ti (optionally ...B) are powers of 1024. '2.5GB' = 2.5e9, '512M' = 5.12e8,
 * '1e9' = 1e9, '4GiB' = 4294967296. Fractions of a byte are rounded down. `what` names the setting in
 * error messages (default '--max-memory'). Throws for anything else, zero, or 9 PB and more.
 */
export function parseSize(text: string, what = '--max-memory'): number {
  const m = typeof text === 'string' ? /^\s*(\d+(?:\.\d*)?|\.\d+)(?:e([+-]?\d+))?\s*([a-z]*)\s*$/i.exec(text) : null;
  const unit = m ? SIZE_UNITS[m[3]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) {
    throw new Error(`Expected a size like 2.5GB, 512M, 4GiB or 1e9 for ${what} but received ${boundJson(text)}`);
  }
  const value = Math.floor(Number(`${m[1]}e${m[2] ?? 0}`) * unit);
  if (!(value > 0)) throw new Error(`Expected a positive size for ${what} but received ${boundJson(text)}`);
  if (!Number.isSafeInteger(value)) throw new Error(`Expected a size below 9 PB for ${what} but received ${boundJson(text)}`);
  return value;
}

const DURATION_UNITS = { s: 1, m: 60, h: 3600 } as const;

/**
 * A positive duration written `<n>s`, `<n>m` or `<n>h` (n may have a fraction, a blank may separate the
 * unit: '90s', '10m', '1.5 h'), in seconds; undefined for anything else (including a bare number, whose
 * unit would be a guess).
 */
export function durationSeconds(text: string): number | undefined {
  const m = typeof text === 'string' ? /^\s*(\d+(?:\.\d+)?)\s*([smh])\s*$/.exec(text) : null;
  if (!m) return undefined;
  const v = Number(m[1]) * DURATION_UNITS[m[2] as keyof typeof DURATION_UNITS];
  return v > 0 && Number.isFinite(v) ? v : undefined;
}

/** `durationSeconds`, throwing `Expected a duration (e.g. 90s, 10m, 1h) for <what> but received "<text>"`. */
export function parseDuration(text: string, what: string): number {
  const v = durationSeconds(text);
  if (v === undefined) throw new Error(`Expected a duration (e.g. 90s, 10m, 1h) for ${what} but received ${boundJson(text)}`);
  return v;
}
