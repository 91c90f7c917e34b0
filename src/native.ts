// Loads the compiled addon and describes its functions with a private TypeScript interface.
// Only this module touches the raw addon; public classes validate arguments before calling it.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { packageRoot } from './util/package-root.js';
import type { NativeLsh } from './lsh/native-types.js';
import type { NativeNetwork } from './network/native-types.js';

/** Raw functions exported by build/Release/sublinear.node. */
export interface NativeAddon extends NativeLsh, NativeNetwork {
  abiVersion: number;
  /** topK(scores (rows, cols), rows, cols, k, outIdx (rows, k), outVal (rows, k)): rows in descending score order. */
  topK(scores: Float32Array, rows: number, cols: number, k: number, outIdx: Uint32Array, outVal: Float32Array): void;
  cpuFeatures(): { avx2: boolean; fma: boolean; avx512f: boolean };
}

const EXPECTED_ABI = 1;
let addon: NativeAddon | undefined;
let addonPath: string | undefined;

/**
 * Environment variable naming an addon file to load instead of build/Release or build/Debug, e.g. the
 * sanitizer build of `npm run test:asan`. When set, only that file is tried (a typo must not silently
 * test the regular build). Inherited by worker threads and child processes. Default: unset.
 */
export const ADDON_ENV = 'SUBLINEAR_ADDON';

/** Returns the loaded addon, loading it on first use. Throws a message that says how to rebuild. */
export function native(): NativeAddon {
  if (addon) return addon;
  const root = packageRoot();
  const override = process.env[ADDON_ENV];
  const candidates = override ? [resolve(override)] : [join(root, 'build', 'Release', 'sublinear.node'), join(root, 'build', 'Debug', 'sublinear.node')];
  const require = createRequire(import.meta.url);
  const errors: string[] = [];
  for (const file of candidates) {
    if (!existsSync(file)) {
      errors.push(`${file}: not found`);
      continue;
    }
    try {
      const loaded = require(file) as NativeAddon;
      if (loaded.abiVersion !== EXPECTED_ABI) {
        errors.push(`${file}: ABI version ${loaded.abiVersion}, expected ${EXPECTED_ABI} (stale build)`);
        continue;
      }
      addon = loaded;
      addonPath = file;
      return addon;
    } catch (e) {
      errors.push(`${file}: ${(e as Error).message}`);
    }
  }
  if (override) {
    throw new Error(`sublinear: could not load the native addon named by ${ADDON_ENV}.\n${errors.map((e) => `  - ${e}`).join('\n')}\nUnset ${ADDON_ENV} to use the regular build.`);
  }
  throw new Error(
    'sublinear: could not load the native addon.\n' +
      errors.map((e) => `  - ${e}`).join('\n') +
      '\nPossible solutions:\n' +
      '  1. Rebuild it: `npm rebuild sublinear` (in a clone of the repository: `npm run build:native`).\n' +
      '  2. Make sure python3, make and a C++17 compiler are installed, then rebuild.\n' +
      '  3. If npm skipped install scripts, allow them for sublinear (npm 11: `npm install --allow-scripts=sublinear`) and reinstall.',
  );
}

/** The file the addon was loaded from in this thread (loading it if needed). Worker threads load their own. */
export function addonFile(): string {
  native();
  return addonPath!;
}
