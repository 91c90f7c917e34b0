// The selection phase of one process's fit() (src/train/fit-network.ts) for a label-sharded run
// (src/train/sharded-fit.ts). On small training sets (a held-out slice under ValidationOptions.minHoldout) one
// process chooses the epoch count (and the re-ranker's weight, and fits the calibration) by k-fold
// cross-validation, and with ValidationOptions.refitMaxPoints by a held-out run of a copy; the network then
// trains on all of the points for the chosen epochs. A sharded run does the same: rank 0 runs one process's
// selection (selectEpochs / selectOnHoldout: the same code) on a whole network of the run's configuration,
// whose initial weights are the ranks' slices' (initSliceRows and initFeatureRows draw a slice's rows as the
// whole network draws them), each fold with one worker as one process with --workers 1 trains them; the
// report reaches every rank, and the ranks then train the sharded network on all of the points (fitSharded's
// `selection`).
//
// Why rank 0 runs the folds whole instead of every rank its label shard of each fold copy: the selection
// only runs where one process holds the copies (KFOLD_MEMORY: the folds side by side within 2 GiB, on sets
// under 2,000 points by default), and the same code on the same initial weights makes the same decisions by
// construction, where sharded fold copies would make them only up to the float summation order of the
// sharded step (which moved debian-tags' stopping epoch by one). The other ranks wait for rank 0's report.
import type { SparseDataset } from '../datasets/csr.js';
import type { NetworkConfig } from '../network/config.js';
import type { InputMap } from '../network/input-map.js';
import { Network } from '../network/network.js';
import type { CalibrationOptions } from '../network/calibration.js';
import { selectionMethod, type ResolvedValidation, type SelectionReport } from './early-stop.js';
import { compactInputs, KFOLD_MEMORY, kfoldFolds, kfoldSnapshotBytes, selectEpochs, selectOnHoldout } from './fit-network.js';
import { resolveFitOptions, type FitOptions, type FitProgress } from './fit.js';

/** What the selection phase of a sharded run gave (alike on every rank). */
export type ShardSelection =
  /** The selection ran: train on all of the points as it says. */
  | { report: SelectionReport }
  /** A signal stopped it: nothing is trained. */
  | { stopped: true }
  /** No selection phase: the held-out slice chooses, as it does on larger sets (`why` says why, when one was wanted). */
  | { none: true; why?: string };

/** Options of selectSharded: the run's training options, as one process's fit() gets them. */
export interface ShardSelectOptions {
  /** The input map of the ranks' network (src/network/input-map.ts; `config` is then the declared one, `data` mapped). Default none. */
  inputMap?: InputMap;
  batchSize: number;
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  calibration?: CalibrationOptions | false;
  signal?: AbortSignal;
  /** Rank 0's progress through the folds (or the copy's epochs). */
  onProgress?: (p: FitProgress) => void;
  onWarning?: (message: string) => void;
}

/** The collective that hands rank 0's text to every rank. */
export type Agree = (value: string) => string;

/**
 * Whether a sharded run of `points` training points has a selection phase (before anything is built): k-fold
 * selection below minHoldout, a refit up to refitMaxPoints. Alike on every rank.
 */
export function wantsSelection(points: number, validation: ResolvedValidation | null): 'kfold' | 'refit' | null {
  if (!validation) return null;
  if (selectionMethod(points, validation) === 'kfold') return 'kfold';
  return validation.refitMaxPoints > 0 && points <= validation.refitMaxPoints ? 'refit' : null;
}

/**
 * The selection phase of a sharded run (a collective: every rank calls it with the same arguments). `data` is
 * the training data as every rank holds it, input-scaled. Rank 0 runs one process's selection on a whole
 * network of `config`; `agree` hands its result to the others.
 */
export async function selectSharded(
  isRoot: boolean, agree: Agree, config: NetworkConfig, data: SparseDataset, validation: ResolvedValidation, o: ShardSelectOptions,
): Promise<ShardSelection> {
  const want = wantsSelection(data.points, validation);
  if (!want) return { none: true };
  let text = '';
  // (A failure on rank 0 ends the job, naming it, while the others wait here: MPI ends them with it.)
  if (isRoot) text = JSON.stringify(await runSelection(want, config, data, validation, o));
  return JSON.parse(agree(text)) as ShardSelection;
}

async function runSelection(want: 'kfold' | 'refit', config: NetworkConfig, data: SparseDataset, validation: ResolvedValidation, o: ShardSelectOptions): Promise<ShardSelection> {
  // The network one process would train, as it starts (the ranks' slices hold its rows).
  const net = new Network(config, o.inputMap ? { inputMap: o.inputMap } : {});
  const copyBytes = net.memoryBytes() + kfoldSnapshotBytes(net.config);
  // The copies take the training data's features only, as in one process (compactInputs).
  const inputs = want === 'kfold' ? compactInputs(net, data) : null;
  const folds = want === 'kfold' ? kfoldFolds(net, data.points, validation, inputs) : 0;
  // One process's rules: k-fold only with at least two folds' copies in KFOLD_MEMORY, a refit with one copy.
  if (want === 'kfold' && folds < 2) return { none: true, why: 'fewer than minHoldout, but two copies of the network for k-fold selection exceed 2 GiB' };
  if (want === 'refit' && copyBytes > KFOLD_MEMORY) return { none: true, why: 'a copy of the network would exceed 2 GiB' };
  const opts: FitOptions = {
    epochs: validation.maxEpochs, batchSize: o.batchSize, lr: o.lr,
    ...(o.beta1 !== undefined ? { beta1: o.beta1 } : {}), ...(o.beta2 !== undefined ? { beta2: o.beta2 } : {}), ...(o.eps !== undefined ? { eps: o.eps } : {}),
    // One worker (a fold's, or the copy's), one thread: as one process with --workers 1, and as a rank trains.
    workers: 1, threads: 1, inputScaling: 'off',
    ...(o.calibration !== undefined ? { calibration: o.calibration } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
    ...(o.onWarning ? { onWarning: o.onWarning } : {}),
  };
  const picked = folds >= 2
    ? await selectEpochs(net, data, validation, folds, inputs, opts, resolveFitOptions(opts))
    : await selectOnHoldout(net, data, validation, opts, resolveFitOptions(opts));
  return picked ? { report: picked } : { stopped: true };
}
