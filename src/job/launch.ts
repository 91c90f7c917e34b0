// launch() (`sublinear launch -np R -- train ...`): runs a sublinear command as an Open MPI job and stands between
// the user (a terminal, a scheduler) and mpirun, so that stopping the job behaves as stopping one process.
//
// Why: Open MPI's mpirun does not forward SIGINT or SIGTERM to the ranks. On either it kills them (SIGCONT,
// SIGTERM one second later, SIGKILL one second after that) and exits 1, so Ctrl-C would lose the run since
// the last periodic checkpoint and a scheduler could not tell an interrupted job from a failed one. mpirun
// does forward SIGUSR1 and SIGUSR2, which label-sharded `train --distributed` ranks take as SIGINT and SIGTERM
// (src/cli/train.ts): every rank stops after the same step, writes its slice of a checkpoint and exits 130 or
// 143, and mpirun exits with that code. This launcher starts mpirun in a process group of its own (a
// terminal's Ctrl-C reaches the launcher only), turns SIGINT/SIGTERM into SIGUSR1/SIGUSR2 for mpirun, and exits
// with mpirun's code. A second signal ends the job at once (SIGTERM to mpirun, which kills the ranks).
//
// The ranks run this package's CLI with this Node (process.execPath): no `npx` (which may install or build
// the package again in every rank) and no PATH lookup on the hosts.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../util/usage-error.js';

/** What launch() runs. */
export interface LaunchJob {
  /** Ranks (mpirun -np). Required. */
  ranks: number;
  /** The sublinear command the ranks run, without `sublinear` (e.g. ['train', '--train', 't.txt']). Required. */
  command: readonly string[];
  /** An Open MPI hostfile (mpirun --hostfile). Default none: mpirun's default (this host). */
  hostfile?: string;
  /** Hosts (mpirun --host, e.g. 'a:2,b:2'). Default none. */
  host?: string;
  /** Further mpirun arguments, placed before the program (e.g. ['--mca', 'btl_tcp_if_include', 'eth0']). Default none. */
  mpirunArgs?: readonly string[];
  /** The mpirun program. Default 'mpirun' (found on PATH). */
  mpirun?: string;
  /** Environment of mpirun (and so of the ranks on this host). Default this process's. */
  env?: NodeJS.ProcessEnv;
  /** Called with the mpirun command line before it starts (for a progress line). Default none. */
  onStart?: (argv: readonly string[]) => void;
  /** Called when a signal arrives, with what the launcher does about it. Default none. */
  onSignal?: (text: string) => void;
}

/** Commands whose ranks stop together on SIGUSR1/SIGUSR2 with a checkpoint (label-sharded train). */
function checkpointsOnStop(command: readonly string[]): boolean {
  return command[0] === 'train' && !command.includes('--data-parallel');
}

/** The CLI script the ranks run (this package's, next to this file in dist/src). */
function cliScript(): string {
  return fileURLToPath(new URL('../cli.js', import.meta.url));
}

/** The mpirun command line of a job: mpirun's arguments, this Node, the CLI, the command with --distributed. */
export function launchArgv(job: LaunchJob): string[] {
  if (!Number.isSafeInteger(job.ranks) || job.ranks < 1) throw new UsageError(`-np expects a positive number of ranks but received ${job.ranks}`);
  const [cmd] = job.command;
  if (!cmd) throw new UsageError('missing the command the ranks run: sublinear launch -np 2 -- train --train t.txt ...');
  if (!['train', 'eval', 'predict'].includes(cmd)) throw new UsageError(`'${cmd}' does not run under MPI: launch runs train, eval or predict`);
  const command = job.command.includes('--distributed') ? [...job.command] : [...job.command, '--distributed'];
  return [
    job.mpirun ?? 'mpirun', '-np', String(job.ranks),
    ...(job.hostfile ? ['--hostfile', job.hostfile] : []),
    ...(job.host ? ['--host', job.host] : []),
    ...(job.mpirunArgs ?? []),
    process.execPath, cliScript(), ...command,
  ];
}

/** Runs the job; resolves to the exit code (mpirun's, or 128 + the signal that ended it). */
export function launch(job: LaunchJob): Promise<number> {
  const argv = launchArgv(job);
  const forward = checkpointsOnStop(job.command);
  job.onStart?.(argv);
  return new Promise((resolvePromise, reject) => {
    // detached: mpirun leads a process group of its own, so a terminal's Ctrl-C reaches this process only.
    const child = spawn(argv[0]!, argv.slice(1), { stdio: 'inherit', env: job.env ?? process.env, detached: true });
    let signals = 0;
    const onSignal = (sig: 'SIGINT' | 'SIGTERM') => {
      signals++;
      if (signals === 1 && forward) {
        const to = sig === 'SIGINT' ? 'SIGUSR1' : 'SIGUSR2';
        job.onSignal?.(`${sig}: every rank checkpoints after the step in progress and the job exits ${sig === 'SIGINT' ? 130 : 143} (again to stop at once)`);
        child.kill(to);
      } else {
        job.onSignal?.(`${sig}: ending the job now`);
        child.kill('SIGTERM');
      }
    };
    const onInt = () => onSignal('SIGINT');
    const onTerm = () => onSignal('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
    const done = () => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    };
    child.on('error', (err: NodeJS.ErrnoException) => {
      done();
      reject(err.code === 'ENOENT' ? new Error(`${argv[0]}: not found (install Open MPI: apt-get install openmpi-bin libopenmpi-dev)`) : err);
    });
    child.on('exit', (code, signal) => {
      done();
      resolvePromise(code ?? 128 + (signal ? constants.signals[signal] : 0));
    });
  });
}
