// Loads the compiled addon and describes its functions with a private TypeScript interface.
// Only this module touches the raw addon; public classes validate arguments before calling it.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { packageRoot } from '../util/package-root.js';
import type { NativeLsh } from './lsh-types.js';
import type { NativeNetwork, NativeRerank, NativeShard } from './network-types.js';

/** Raw functions exported by build/Release/sublinear.node. */
export interface NativeAddon extends NativeLsh, NativeNetwork, NativeShard, NativeRerank {
  abiVersion: number;
  /** topK(scores (rows, cols), rows, cols, k, outIdx (rows, k), outVal (rows, k)): rows in descending score order. */
  topK(scores: Float32Array, rows: number, cols: number, k: number, outIdx: Uint32Array, outVal: Float32Array): void;
  /** What the running CPU offers (x86-64: AVX2, FMA, AVX-512F; arm64: Advanced SIMD) and the addon's architecture. */
  cpuFeatures(): { avx2: boolean; fma: boolean; avx512f: boolean; neon: boolean; arch: 'x64' | 'arm64' | 'other' };
}

const EXPECTED_ABI = 1;
let addon: NativeAddon | undefined;
let loadedFile: string | undefined;

/**
 * Environment variable naming an addon file to load instead of build/Release or build/Debug, e.g. the
 * sanitizer build of `npm run test:asan`. When set, only that file is tried (a typo must not silently
 * test the regular build). Inherited by worker threads and child processes. Default: unset.
 */
/**
 * The most threads one native call takes (every kernel checks `threads` in [1, NATIVE_MAX_THREADS] and throws
 * beyond): counts derived from the machine's cores are clamped to it, so a host with more cores than this
 * runs (with this many threads per call) instead of failing the check.
 */
export const NATIVE_MAX_THREADS = 256;

/** The machine's cores as a native call's thread count: in [1, NATIVE_MAX_THREADS]. */
export function nativeThreads(cores: number): number {
  return Math.min(NATIVE_MAX_THREADS, Math.max(1, Math.floor(cores)));
}

export const ADDON_ENV = 'SUBLINEAR_ADDON';

/**
 * Environment variable read by the addon itself (native/net_kernels.cc) when it first runs a blocked
 * kernel: `avx2` or `sse` (x86-64), `scalar` (arm64) selects a lower instruction set than the CPU's best for
 * the dense block kernels (forward, gradients, softmax), for tests that compare them. Results differ from the default only in
 * floating-point rounding (the order of the sums); an unknown value is ignored. Inherited by worker
 * threads. Default: unset (the best the CPU supports). These two, and SUBLINEAR_MPI_ADDON of
 * `train --distributed` (src/train/mpi.ts), are the only environment variables sublinear reads at run
 * time; installing reads SUBLINEAR_BUILD_FROM_SOURCE=1 (compile even where a prebuilt binary loads), the
 * build SUBLINEAR_MARCH_NATIVE=1 (-march=native) and JOBS.
 */
export const BLOCK_ISA_ENV = 'SUBLINEAR_BLOCK_ISA';

/**
 * The addon files to try, in order: the override alone when ADDON_ENV is set; else a local build
 * (build/Release, build/Debug: compiled by the install script or `npm run build:native`), then the
 * prebuilt binary shipped in prebuilds/<platform>-<arch>/ that node-gyp-build picks for this platform.
 * Every thread resolves the same list, so worker threads load the same file as the main thread.
 */
function candidates(root: string, require: NodeJS.Require, notes: string[]): string[] {
  const override = process.env[ADDON_ENV];
  if (override) return [resolve(override)];
  const files = [join(root, 'build', 'Release', 'sublinear.node'), join(root, 'build', 'Debug', 'sublinear.node')];
  try {
    const prebuild = (require('node-gyp-build') as { path(dir: string): string }).path(root);
    if (!files.includes(prebuild)) files.push(prebuild);
  } catch (e) {
    // node-gyp-build's message names the platform, arch, libc and Node version it looked for.
    notes.push(`prebuilds: ${(e as Error).message.trim().split('\n')[0]}`);
  }
  return files;
}

/** Returns the loaded addon, loading it on first use. Throws a message that says how to rebuild. */
export function native(): NativeAddon {
  if (addon) return addon;
  const root = packageRoot();
  const require = createRequire(import.meta.url);
  const errors: string[] = [];
  const notes: string[] = [];
  for (const file of candidates(root, require, notes)) {
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
      loadedFile = file;
      return addon;
    } catch (e) {
      errors.push(`${file}: ${(e as Error).message}`);
    }
  }
  const list = [...errors, ...notes].map((e) => `  - ${e}`).join('\n');
  if (process.env[ADDON_ENV]) {
    throw new Error(`sublinear: could not load the native addon named by ${ADDON_ENV}.\n${list}\nUnset ${ADDON_ENV} to use the regular build.`);
  }
  throw new Error(`sublinear: could not load the native addon.\n${list}\n${REBUILD_ADVICE}`);
}

/** The file the addon was loaded from in this thread (after native() succeeded), else undefined. */
export function addonPath(): string | undefined {
  return loadedFile;
}

/** The file the addon was loaded from in this thread, loading it if needed. Worker threads load their own. */
export function addonFile(): string {
  native();
  return loadedFile!;
}

/**
 * How to get a working addon. npm 11 skips dependencies' install scripts unless they are allowed, so a
 * platform without a prebuilt binary (anything but linux-x64 and linux-arm64 with glibc) gets no compiled addon from
 * `npm install`; `npm rebuild <name>` runs the named package's install script even when not allowed
 * (checked with npm 11.19), and `--allow-scripts` is refused in project installs (EALLOWSCRIPTS).
 */
export const REBUILD_ADVICE = [
  'To compile it (needs python3, make and a C++17 compiler: g++ >= 9 or clang >= 10):',
  '  - where sublinear is a dependency: `npm rebuild sublinear` in the project folder',
  '    (npm 11: `npm install-scripts approve sublinear` lets later installs compile it too)',
  '  - installed globally: `npm rebuild -g sublinear`',
  '  - in a clone of the repository: `npm run build:native`',
].join('\n');
