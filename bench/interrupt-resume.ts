// Interrupts of a small-data `sublinear train` run (copies of the network choose the epoch count: 5-fold
// cross-validation below 2,000 points, or with --refit a held-out copy; then the network trains on all
// points, then the re-ranker): SIGTERM and SIGKILL at --moments seeded random moments each, then
// `train --resume` of the checkpoint directory, compared with an uninterrupted run.
//
//   node dist/bench/interrupt-resume.js [--moments 10] [--seed 1] [--points 1500] [--refit] [--json]
//
// For each interrupt: the phase it hit (what the run said, and the phase of the newest checkpoint left), the
// exit status, whether a model file was left and what the run said about it, and after the resume (if a
// checkpoint was there; else a fresh run) the test metrics and whether the final model's weights are
// bit-identical to the uninterrupted run's (one worker, one thread). Last stdout line: a JSON report.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../src/network/network.js';
import { listCheckpoints, readCheckpoint } from '../src/train/checkpoint.js';
import { packageRoot } from '../src/util/package-root.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { CaseRng } from './case-rng.js';

const CLI = join(packageRoot(), 'dist', 'src', 'cli.js');

interface Outcome {
  signal: 'SIGTERM' | 'SIGKILL';
  atMs: number;
  phase: string;
  /** The phase of the newest checkpoint left ('selection' or 'train'), or 'none'. */
  checkpointPhase: string;
  code: number | null;
  modelLeft: boolean;
  said: string;
  resumed: 'resume' | 'fresh run' | 'finished before the signal';
  p1: number | null;
  identical: boolean;
}

/** A hash of every array a model file holds that prediction reads (weights, biases, wide part, re-ranker). */
async function modelHash(file: string): Promise<string> {
  const net = await Network.load(file);
  const h = createHash('sha256');
  for (const l of net.spec.layers) {
    for (const a of [l.weights, l.bias]) h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
    if (l.wide) for (const a of [l.wide.offsets, l.wide.labels, l.wide.weights]) h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  }
  if (net.rerank) {
    h.update(String(net.rerank.weight));
    for (const a of [net.rerank.offsets, net.rerank.features, net.rerank.weights, net.rerank.bias]) h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  }
  return h.digest('hex');
}

function train(args: string[], cwd: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, 'train', ...args], { cwd, encoding: 'utf8', maxBuffer: 1 << 26 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const p1Of = (stdout: string): number | null => {
  try {
    return (JSON.parse(stdout.trim().split('\n').at(-1)!) as { p1?: number }).p1 ?? null;
  } catch {
    return null;
  }
};

export const interruptCmd = defineCommand({
  name: 'bench/interrupt-resume',
  summary: 'SIGTERM and SIGKILL at random moments of a small-data train run, then --resume: compared with an uninterrupted run.',
  flags: {
    moments: { type: 'integer', min: 1, default: 10, valueName: 'n', description: 'interrupts per signal' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 's', description: 'seed of the moments' },
    points: { type: 'integer', min: 100, default: 1500, valueName: 'n', description: 'training points (tiny shape, seed 1; below 2,000: 5-fold selection)' },
    refit: { type: 'boolean', description: 'select on a held-out copy, then refit on all points (validation.refitMaxPoints 20,000; give --points 2000 or more)' },
    json: { type: 'boolean', description: 'print only the JSON report' },
  },
  run: async (o, io) => {
    const say = (s: string) => void (o.json ? undefined : io.out(s));
    const dir = await mkdtemp(join(tmpdir(), 'sublinear-interrupts-'));
    try {
      const synth = spawnSync(process.execPath, [CLI, 'data', 'synth', '--shape', 'tiny', '--train', String(o.points), '--test', '500', '--seed', '1', '--out', 'tiny'], { cwd: dir, encoding: 'utf8' });
      if (synth.status !== 0) throw new Error(synth.stderr);
      if (o.refit) await writeFile(join(dir, 'refit.json'), JSON.stringify({ validation: { refitMaxPoints: 20_000 } }));
      const common = ['--train', 'tiny/train.txt', '--test', 'tiny/test.txt', '--workers', '1', '--threads', '1', '--checkpoint-every', '5', '--json',
        ...(o.refit ? ['--config', 'refit.json'] : [])];
      const t0 = performance.now();
      const ref = train([...common, '--checkpoint', 'ck-ref', '--save', 'ref.sl'], dir);
      const refMs = performance.now() - t0;
      if (ref.code !== 0) throw new Error(`the uninterrupted run failed: ${ref.stderr}`);
      const refP1 = p1Of(ref.stdout);
      const refHash = await modelHash(join(dir, 'ref.sl'));
      say(`uninterrupted: P@1 ${refP1}, ${(refMs / 1000).toFixed(1)} s\n`);
      const outcomes: Outcome[] = [];
      const r = new CaseRng(o.seed, 0);
      for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
        for (let i = 0; i < o.moments; i++) {
          const atMs = Math.round(300 + r.next() * refMs);
          const ck = join(dir, `ck-${signal}-${i}`), model = join(dir, `m-${signal}-${i}.sl`);
          const child = spawn(process.execPath, [CLI, 'train', ...common, '--checkpoint', ck, '--save', model], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
          let stderr = '';
          child.stderr.on('data', (d) => (stderr += d));
          child.stdout.resume();
          const exited = new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
          const timer = setTimeout(() => child.kill(signal), atMs);
          const code = await exited;
          clearTimeout(timer);
          const at = stderr.search(/\n(Ctrl-C|SIGTERM): stopping/);
          const progress = at >= 0 ? stderr.slice(0, at) : stderr;
          const [newest] = await listCheckpoints(ck);
          const checkpointPhase = newest ? (await readCheckpoint(newest.file, (c) => new Network(c))).meta.position.phase ?? 'train' : 'none';
          const phase = /stopped while choosing the epoch count/.test(stderr) ? 'selection'
            : /re-ranker|saved /.test(progress) ? 'after training'
            : /trained \d+ samples/.test(progress) ? 're-ranker'
            : checkpointPhase === 'train' ? 'training on all points'
            : checkpointPhase === 'selection' ? 'selection (or its end)' : 'before the selection';
          const modelLeft = existsSync(model);
          const said = stderr.split('\n').filter((l) => /no trained model|not written|saved |stopped/.test(l)).join(' | ').slice(0, 300);
          let resumed: Outcome['resumed'];
          let fin;
          if (code === 0) {
            resumed = 'finished before the signal';
            fin = { code, stdout: '' };
          } else if (newest) {
            resumed = 'resume';
            fin = train(['--resume', ck, '--json', '--save', model], dir);
          } else {
            resumed = 'fresh run';
            fin = train([...common, '--checkpoint', ck, '--save', model], dir);
          }
          const p1 = code === 0 ? p1Of(stderr) ?? refP1 : p1Of(fin.stdout);
          const identical = fin.code === 0 && existsSync(model) && (await modelHash(model)) === refHash;
          const out: Outcome = { signal, atMs, phase, checkpointPhase, code, modelLeft, said, resumed, p1, identical };
          outcomes.push(out);
          say(`${signal} at ${(atMs / 1000).toFixed(1)} s (${phase}): exit ${code}, model left: ${modelLeft}${said ? ` [${said}]` : ''}; ${resumed}: P@1 ${p1}, identical: ${identical}\n`);
        }
      }
      const all = outcomes.every((x) => x.identical);
      say(`${outcomes.filter((x) => x.identical).length} of ${outcomes.length} interrupted runs ended with the uninterrupted run's model\n`);
      io.out(JSON.stringify({ points: o.points, refit: !!o.refit, seed: o.seed, reference: { p1: refP1, seconds: refMs / 1000 }, outcomes, allIdentical: all }) + '\n');
      return all ? 0 : 1;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});

await benchMain(import.meta.url, interruptCmd, 'node dist/bench/interrupt-resume.js');
