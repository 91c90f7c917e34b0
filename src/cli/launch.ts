// `sublinear launch -n R -- <command>`: the flags become a job for launch() (src/job/launch.ts): mpirun runs the
// command (train, eval, predict; --distributed added) in R ranks of this package's CLI, and Ctrl-C or SIGTERM
// stops a training job with a checkpoint and exit 130/143 instead of mpirun's kill and exit 1.
import { launch } from '../job/launch.js';
import { defineCommand } from './args.js';

export const launchCmd = defineCommand({
  name: 'launch',
  summary: 'Run train, eval or predict as an MPI job (mpirun), stopping it as one process stops: Ctrl-C checkpoints and exits 130.',
  description:
    'Runs mpirun -n R <this node> <this CLI> <command> --distributed. The ranks run this package as installed (no npx in ' +
    'every rank). mpirun itself does not pass SIGINT or SIGTERM on to the ranks (it kills them and exits 1); launch turns ' +
    'them into SIGUSR1 and SIGUSR2, which mpirun forwards: every rank of train stops after the same step, writes its ' +
    'slice of a checkpoint (--checkpoint) and exits 130 (SIGINT) or 143 (SIGTERM), as does launch. A second signal ends ' +
    'the job at once. Without launch, send SIGUSR1 or SIGUSR2 to mpirun, or SIGINT or SIGTERM to any rank, for the same ' +
    'stop. Needs Open MPI (see docs/distributed.md).',
  rest: { name: 'command', description: 'the sublinear command the ranks run, e.g. train --train t.txt --test s.txt --checkpoint ckpt' },
  flags: {
    ranks: { type: 'integer', short: 'n', required: true, valueName: 'R', description: 'number of ranks (mpirun -n)' },
    hostfile: { type: 'string', valueName: 'file', description: 'Open MPI hostfile (mpirun --hostfile); default: this host' },
    host: { type: 'string', valueName: 'list', description: 'hosts and slots, e.g. a:2,b:2 (mpirun --host)' },
    mpirunArgs: { type: 'string', valueName: 'args', description: "further mpirun arguments, split at spaces (e.g. '--mca btl_tcp_if_include eth0')" },
    mpirun: { type: 'string', valueName: 'path', description: 'the mpirun program (default: mpirun on PATH)' },
  },
  examples: [
    'launch -n 2 -- train --train train.txt --test test.txt --checkpoint ckpt --save model.sl',
    'launch -n 2 -- train --resume ckpt --save model.sl',
    'launch -n 4 --hostfile hosts -- train --train train.txt --checkpoint ckpt',
  ],
  async run(o, io) {
    const command = (o as unknown as { command: string[] }).command;
    return launch({
      ranks: o.ranks, command,
      ...(o.hostfile ? { hostfile: o.hostfile } : {}), ...(o.host ? { host: o.host } : {}),
      ...(o.mpirunArgs ? { mpirunArgs: o.mpirunArgs.split(/\s+/).filter(Boolean) } : {}),
      ...(o.mpirun ? { mpirun: o.mpirun } : {}),
      onSignal: (text) => io.err(`sublinear launch: ${text}\n`),
    });
  },
});
