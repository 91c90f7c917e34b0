// What the tests that spawn mpirun share: why they skip here (no mpirun, no MPI addon) and the environment
// Open MPI needs to run their ranks as root and more ranks than cores.
import { spawnSync } from 'node:child_process';
import { mpiAddonPath } from '../../src/train/mpi.js';

/** Why MPI jobs cannot run on this machine (mpirun or the MPI addon missing), or null. */
export function mpiSkipReason(): string | null {
  if (spawnSync('mpirun', ['--version'], { encoding: 'utf8' }).status !== 0) return 'mpirun not found (apt-get install openmpi-bin libopenmpi-dev)';
  if (!mpiAddonPath()) return 'the MPI addon is not built (npm run build:mpi)';
  return null;
}

/** Open MPI refuses root without the first two; more ranks than cores need --oversubscribe. */
export const MPI_ENV = { ...process.env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMPI_MCA_rmaps_base_oversubscribe: '1' };
