// What `sublinear train --checkpoint` records in each checkpoint besides the network (its settings and
// its epochs' records), and how `--resume` reads them back and checks that there is something to resume.
import { resolve } from 'node:path';
import type { Network } from '../network/network.js';
import { resumeInfo, runOf } from '../train/fit-network.js';
import { validationEnded } from '../train/early-stop.js';
import type { Metrics } from '../network/metrics.js';
import { listCheckpoints } from '../train/checkpoint.js';
import { assertUnlocked } from '../train/lock.js';
import type { TrainJob } from './train-options.js';

/**
 * What `train --checkpoint` stores in each checkpoint (CheckpointOptions.extra), so that `--resume`
 * can continue with the same data and settings: paths are absolute (resume may run elsewhere).
 */
const SAVED_CLI_KEYS = ['train', 'test', 'format', 'inputFormat', 'minDf', 'bigrams', 'maxVocabulary', 'hashBits', 'init', 'zeroBased', 'save', 'evalEvery', 'workers', 'threads', 'maxMemory', 'mode', 'propensityA', 'propensityB', 'checkpointEvery', 'log'] as const;

/** The settings of SAVED_CLI_KEYS as the train command took them (train always given). */
type SavedCli = Pick<TrainJob, (typeof SAVED_CLI_KEYS)[number]> & { train: string };

export function savedCli(o: TrainJob & { train: string }): SavedCli {
  const s: Record<string, unknown> = {};
  // Paths only: data in memory and a network given as init are not recorded (a resume is given them again).
  for (const k of SAVED_CLI_KEYS) if (o[k] !== undefined && (typeof o[k] !== 'object' || o[k] === null)) s[k] = o[k];
  for (const k of ['train', 'test', 'save', 'log', 'init'] as const) if (typeof o[k] === 'string') s[k] = resolve(o[k]);
  return s as unknown as SavedCli;
}

/** The paths a checkpoint records that a resumed run writes: never used unless confirmed (--use-recorded-outputs). */
export const OUTPUT_KEYS = ['save', 'log'] as const;

/** The CLI settings recorded in a checkpoint's extra, or null when it holds none (an API-written checkpoint). */
export function readSavedCli(extra: unknown): Partial<SavedCli> | null {
  const cli = (extra as { cli?: unknown } | null)?.cli;
  if (!cli || typeof cli !== 'object') return null;
  const out: Record<string, unknown> = {};
  for (const k of SAVED_CLI_KEYS) {
    const v = (cli as Record<string, unknown>)[k];
    // A value of the wrong type (a damaged or hand-made file) is not used.
    const numeric = ['evalEvery', 'workers', 'threads', 'maxMemory', 'propensityA', 'propensityB', 'minDf', 'maxVocabulary', 'hashBits'].includes(k);
    const flag = k === 'zeroBased' || k === 'bigrams';
    if (flag ? typeof v === 'boolean' : numeric ? typeof v === 'number' && Number.isFinite(v) : typeof v === 'string' && v !== '') out[k] = v;
  }
  return out as Partial<SavedCli>;
}

/**
 * The epoch records a checkpoint holds (extra.epochs): those of epochs 1..`completed`, or [] when it
 * holds none or they are malformed (written before they were recorded, or not by sublinear train).
 */
export function readSavedRecords(extra: unknown, completed: number): EpochRecord[] {
  const list = (extra as { epochs?: unknown } | null)?.epochs;
  if (!Array.isArray(list)) return [];
  const ok = list.every((r, i) => r !== null && typeof r === 'object' && (r as EpochRecord).epoch === i + 1 &&
    typeof (r as EpochRecord).trainSeconds === 'number' && typeof (r as EpochRecord).loss === 'number');
  return ok ? (list as EpochRecord[]).slice(0, completed) : [];
}

/**
 * Refuses, before any data is read, a checkpoint directory that a live run holds or that already holds
 * checkpoints (`resumedDir`: the directory the network was resumed from, whose checkpoints are its own).
 * The Checkpointer checks both again when it takes the lock; this only makes the common mistakes cheap.
 */
export async function checkCheckpointDirFree(dir: string, resumedDir: string | null): Promise<void> {
  if (resumedDir !== null && resolve(resumedDir) === resolve(dir)) return;
  await assertUnlocked(dir);
  const existing = await listCheckpoints(dir).catch(() => []);
  if (existing.length > 0) {
    throw new Error(`checkpoint directory ${dir} already holds checkpoints of another run (newest: ${existing[0]!.file}); ` +
      `resume them (sublinear train --resume ${dir}) or use an empty directory`);
  }
}

/**
 * Refuses to resume a run that has nothing left to train, saying why: one that held-out validation
 * stopped (--epochs does not extend it: its early stopping would end it again at once), or one that
 * finished its epochs (unless --epochs asks for more).
 */
export function checkResumable(net: Network, epochs: number | undefined): void {
  const info = resumeInfo(net)!;
  const p = info.position, f = info.fitOptions;
  const e = runOf(net).earlyStop?.state;
  if (f.validation && e && validationEnded(e, f.validation)) {
    const how = f.validation.schedule === 'anneal'
      ? `its score stopped improving at epoch ${e.annealFrom} and the learning rate then fell to 0 over ${e.annealFor ?? f.validation.annealEpochs} epoch(s); the weights of epoch ${e.bestEpoch} were kept`
      : `its score did not improve for ${e.bad} epoch(s) after epoch ${e.bestEpoch}, whose weights it kept`;
    throw new Error(`${info.file} is the end of a run that held-out validation stopped: ${how}; there is nothing to resume${epochs !== undefined ? ' (--epochs does not extend such a run)' : ''}. ` +
      'To train longer, start a new run (--epochs n trains exactly n epochs)');
  }
  const planned = epochs ?? f.epochs;
  if (p.batch === 0 && p.epoch >= planned) {
    throw new Error(`${info.file} is the end of a run that finished ${p.epoch === f.epochs ? 'its' : 'after'} ${p.epoch} epoch(s): there is nothing to resume; ` +
      `--epochs n with n > ${p.epoch} trains it further`);
  }
}

/** One line of `--log` and one entry of the JSON `history`: an epoch as it ended. */
export interface EpochRecord {
  epoch: number;
  /** Cumulative training seconds at the end of the epoch. */
  trainSeconds: number;
  loss: number;
  /** Training throughput of this epoch. */
  samplesPerSec: number;
  activePerSample: number;
  labelRecall?: number;
  /** Held-out P@k and the learning rate the epoch used (without --epochs). */
  validation?: { p1: number; p3: number; p5: number; lr: number };
  /** Test metrics, for epochs evaluated with --eval-every. */
  test?: Metrics;
}
