// What a training job leaves when its process is ended at once, before the job could stop cleanly (a second
// Ctrl-C or SIGTERM while it stops after the first: `sublinear train` exits there and then). A file is never
// left half-written (writes are atomic: a file is whole or absent), so what is left is the model if it was
// saved already, else the newest checkpoint on disk, which --resume goes on from.
import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import { listCheckpointsSync } from '../train/checkpoint.js';
import type { TrainJob } from './train-options.js';

/**
 * The line said when the job's process exits at once on `signal`: what is not saved and which checkpoint
 * the run goes on from; `savedTo` is the model file once it is written (then only the test evaluation is lost).
 */
export function forcedStopText(signal: string, job: Pick<TrainJob, 'save' | 'checkpoint' | 'resume'>, savedTo: string | undefined): string {
  const name = signal === 'SIGINT' ? 'Ctrl-C' : signal;
  if (savedTo !== undefined) return `${name} again: exiting at once. ${savedTo} is saved; the test evaluation is skipped`;
  // This run's checkpoint directory: the job's, or the one it resumed from (a file under a checkpoint's name
  // is whole, even if the run has not counted it yet).
  const dir = job.checkpoint ?? (job.resume !== undefined ? checkpointDirOf(job.resume) : undefined);
  const newest = dir !== undefined ? listCheckpointsSync(dir)[0]?.file : undefined;
  const kept = newest !== undefined
    ? `the newest checkpoint is ${newest} (train --resume ${dir} goes on from it)`
    : job.checkpoint !== undefined ? 'no checkpoint was written yet: nothing of this run is kept' : 'no --checkpoint: nothing of this run is kept';
  return `${name} again: exiting at once. ${job.save ? `${job.save} is not saved` : 'The model is not saved'}; ${kept}`;
}

/** The directory of a `resume` path: itself, or a checkpoint file's directory. */
function checkpointDirOf(path: string): string {
  try {
    return statSync(path).isFile() ? dirname(path) : path;
  } catch {
    return path;
  }
}
