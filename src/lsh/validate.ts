// Argument checks shared by src/lsh. Messages follow the project form
// `Expected positive integer for K but received 0`; tests assert them word for word.
import { boundText } from '../util/bounded-text.js';

/** Formats a received value for an error message. */
export function show(value: unknown): string {
  if (typeof value === 'string') return `'${boundText(value)}'`;
  if (Array.isArray(value)) return 'Array';
  if (value !== null && typeof value === 'object') return (value as object).constructor?.name ?? 'object';
  return String(value);
}

export function positiveInt(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0)
    throw new Error(`Expected positive integer for ${name} but received ${show(value)}`);
  return value;
}

export function nonNegativeInt(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    throw new Error(`Expected non-negative integer for ${name} but received ${show(value)}`);
  return value;
}

/** An integer in [lo, hi]. */
export function intInRange(name: string, value: unknown, lo: number, hi: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < lo || value > hi)
    throw new Error(`Expected integer in ${lo}..${hi} for ${name} but received ${show(value)}`);
  return value;
}

export function float32Array(name: string, value: unknown): Float32Array {
  if (!(value instanceof Float32Array)) throw new Error(`Expected Float32Array for ${name} but received ${show(value)}`);
  return value;
}

export function uint32Array(name: string, value: unknown): Uint32Array {
  if (!(value instanceof Uint32Array)) throw new Error(`Expected Uint32Array for ${name} but received ${show(value)}`);
  return value;
}

/** One of the given names. */
export function oneOf<T extends string>(what: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value))
    throw new Error(`Unknown ${what} ${show(value)}: expected one of ${allowed.join(', ')}`);
  return value as T;
}
