// Loads the optional MPI addon (native-mpi/, built by scripts/build-mpi.cjs where MPI's development files
// are found) and describes its functions. Only `train --distributed` (src/train/distributed.ts) uses it;
// the main addon never links MPI.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { packageRoot } from '../util/package-root.js';

/** Raw functions of native-mpi/build/Release/sublinear_mpi.node. Every call blocks until the collective completes. */
export interface MpiAddon {
  abiVersion: number;
  /** MPI_Init_thread (FUNNELED) on the first call; the process's place in MPI_COMM_WORLD. */
  init(): { rank: number; size: number; threadLevel: number; library: string; host: string };
  /** Every rank's bytes, concatenated in rank order, and how many each rank gave. */
  allgatherv(bytes: Uint8Array): { data: Uint8Array; counts: number[] };
  /** Every rank's bytes, concatenated in rank order, on `root` only (the others get an empty array). */
  gatherv(bytes: Uint8Array, root: number): { data: Uint8Array; counts: number[] };
  /** Element-wise sum over the ranks, in place (same length on every rank). */
  allreduceSum(values: Float32Array | Float64Array): void;
  /** Root's contents into every rank's `view` (same byte length on every rank). */
  bcast(view: ArrayBufferView, root: number): void;
  barrier(): void;
  /**
   * A barrier whose waiting ranks sleep between tests (MPI_Ibarrier + MPI_Test, sleeps growing to maxSleepUs,
   * default 1,000) instead of polling a core: where ranks wait while rank 0 alone works.
   */
  idleBarrier(maxSleepUs?: number): void;
  /** MPI_Abort: ends every rank of the job with `code`. */
  abort(code: number): void;
  finalize(): void;
}

/** What to do when the addon is missing: the message `train --distributed` shows. */
export const MPI_MISSING =
  'sublinear: --distributed needs the MPI addon, which is built only where MPI is installed.\n' +
  '  1. Install MPI: `apt-get install openmpi-bin libopenmpi-dev` (Debian/Ubuntu), or load your cluster\'s MPI module (mpicxx must be on PATH).\n' +
  '  2. Rebuild: `npm rebuild sublinear` (in a clone of the repository: `npm run build:mpi`).\n' +
  '  3. Launch with your MPI: `mpirun -np 4 npx sublinear train ... --distributed` (or srun under Slurm).';

/**
 * Environment variable naming the MPI addon file to load instead of native-mpi/build/Release (e.g. one built
 * against another MPI). When set, only that file is tried. Default: unset.
 */
export const MPI_ADDON_ENV = 'SUBLINEAR_MPI_ADDON';

/** The addon file, or null when it was not built. */
export function mpiAddonPath(): string | null {
  const override = process.env[MPI_ADDON_ENV];
  const file = override ? resolve(override) : join(packageRoot(), 'native-mpi', 'build', 'Release', 'sublinear_mpi.node');
  return existsSync(file) ? file : null;
}

let loaded: MpiAddon | undefined;

/** The loaded addon; throws MPI_MISSING (with the loader's reason) when it is absent or does not load. */
export function mpi(): MpiAddon {
  if (loaded) return loaded;
  const file = mpiAddonPath();
  if (!file) throw new Error(MPI_MISSING);
  try {
    const m = createRequire(import.meta.url)(file) as MpiAddon;
    if (m.abiVersion !== 3) throw new Error(`ABI version ${m.abiVersion}, expected 3 (stale build: npm run build:mpi)`);
    loaded = m;
    return m;
  } catch (e) {
    throw new Error(`${MPI_MISSING}\n  (${file}: ${(e as Error).message})`);
  }
}
