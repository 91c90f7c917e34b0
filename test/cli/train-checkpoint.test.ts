// End-to-end reliability of `sublinear train`: a real training process killed with SIGKILL at seeded
// random moments resumes from its last checkpoint and ends with the same model, byte for byte, as an
// uninterrupted run; every checkpoint file left behind loads; --resume settings and overrides; and
// --max-memory refusing a configuration before allocating it. Spawns the compiled CLI
// (`npx tsc -p .` first; `npm test` does it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import { checkpointName, listCheckpoints, readCheckpoint } from '../../src/train/checkpoint.js';
import { LOCK_FILE } from '../../src/train/lock.js';
import { addPart, checkMemory, planMemory, planNetworkMemory, type MemoryPlan } from '../../src/network/memory-plan.js';
import { defaultConfig, resolveConfig, type NetworkConfig } from '../../src/network/config.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { kfoldSnapshotBytes } from '../../src/train/fit-network.js';
import { featuresOf } from '../../src/network/input-map.js';


let dir: string;
let trainFile: string;
let cfgFile: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/train', 'src/network']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-ckcli-'));
  const synth = run('data', 'synth', '--shape', 'tiny', '--train', '3000', '--seed', '7', '--out', join(dir, 'data'));
  expect(synth.code).toBe(0);
  trainFile = join(dir, 'data', 'train.txt');
  cfgFile = join(dir, 'config.json');
  // A sampled output layer, so hash tables and rebuilds are part of what must survive the kill.
  writeFileSync(cfgFile, JSON.stringify({
    inputDim: 2000, seed: 3,
    layers: [{ size: 48 }, { size: 100, sampling: { hash: 'dwta', K: 3, L: 8, budget: 16 } }],
  }));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function lastJson(stdout: string): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as Record<string, unknown>;
}

/** mulberry32: the kill moments are random but the same on every run of the suite. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `train` and SIGKILLs it `delayMs` after a checkpoint newer than `after` batches appears.
 * Resolves with whether the kill happened (false: the run finished first).
 */
async function runAndKill(args: string[], ckDir: string, after: number, delayMs: number): Promise<boolean> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => child.on('exit', (code, signal) => res({ code, signal })));
  let done: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  void exited.then((r) => (done = r));
  for (;;) {
    if (done) break;
    const newest = existsSync(ckDir) ? (await listCheckpoints(ckDir))[0] : undefined;
    if (newest && newest.batchesDone > after) break;
    await sleep(2);
  }
  if (!done) {
    await sleep(delayMs);
    child.kill('SIGKILL');
  }
  const r = await exited;
  if (r.signal === 'SIGKILL') return true;
  expect({ code: r.code, stderr }).toEqual({ code: 0, stderr: '' });
  return false;
}

describe('train killed with SIGKILL, then --resume', () => {
  it('completes with the same model as an uninterrupted run; every checkpoint left behind loads', async () => {
    const common = ['--config', cfgFile, '--epochs', '30', '--workers', '0', '--json'];
    const ref = run('train', '--train', trainFile, ...common, '--save', join(dir, 'ref.sl'));
    expect(ref.code).toBe(0);
    const total = lastJson(ref.stdout).batchesDone as number;
    expect(total).toBe(30 * Math.ceil(3000 / 128));

    const ck = join(dir, 'ck');
    const out = join(dir, 'out.sl');
    const random = rng(20240607);
    let kills = 0;
    let newest = 0;
    // Up to three kills: the first run, then resumed runs, each killed 0-150 ms after its next checkpoint.
    for (let attempt = 0; attempt < 3; attempt++) {
      const args = attempt === 0
        ? ['train', '--train', trainFile, ...common, '--save', out, '--checkpoint', ck, '--checkpoint-every', '5']
        : ['train', '--resume', ck, '--json', '--use-recorded-outputs'];
      const killed = await runAndKill(args, ck, newest, Math.floor(random() * 150));
      if (!killed) break;
      kills++;
      // No file is corrupt: every name that counts as a checkpoint loads (checksum verified); anything
      // else is a temporary file of the dead writer, never matched as a checkpoint.
      const names = readdirSync(ck);
      const ckpts = await listCheckpoints(ck);
      expect(ckpts.length).toBeGreaterThanOrEqual(1);
      // keep = 2, plus one if the kill fell between a new file's rename and the pruning of the oldest.
      expect(ckpts.length).toBeLessThanOrEqual(3);
      for (const c of ckpts) {
        const { meta } = await readCheckpoint(c.file, (cfg) => new Network(cfg));
        expect(meta.position.batchesDone).toBe(c.batchesDone);
        expect(c.batchesDone % 5 === 0 || c.batchesDone === total).toBe(true);
      }
      // (and the killed run's lock file, stale now that its pid is dead: the resumed run takes it over).
      for (const n of names.filter((n) => !/^ckpt-\d+\.bin$/.test(n) && n !== LOCK_FILE)) expect(n).toMatch(/^\.ckpt-\d+\.bin\.tmp-\d+-[0-9a-f]+$/);
      expect(ckpts[0]!.batchesDone).toBeGreaterThan(newest);
      newest = ckpts[0]!.batchesDone;
      // Resume: it starts exactly at the newest checkpoint, so at most the work since then was lost.
      if (attempt === 2 || newest === total) break;
    }
    expect(kills).toBeGreaterThanOrEqual(1);

    const fin = run('train', '--resume', ck, '--json', '--use-recorded-outputs');
    expect(fin.code).toBe(0);
    const summary = lastJson(fin.stdout);
    expect(summary.resumedFrom).toBe(join(ck, checkpointName(newest)));
    expect(summary.resumedAt).toBe(newest);
    expect(summary.batchesDone).toBe(total);
    // The saved --save path was used, and the model is byte-identical to the uninterrupted run's.
    expect(readFileSync(out).equals(readFileSync(join(dir, 'ref.sl')))).toBe(true);
    // Dead writers' temporary files were cleaned up by the resumed run.
    expect(readdirSync(ck).filter((n) => n.includes('.tmp-'))).toEqual([]);
  });
});

describe('train without --epochs (held-out validation decides), killed and resumed', () => {
  it('reports the validation curve and best epoch; a resumed run ends with the same model as an uninterrupted one', async () => {
    // One held-out run (no second run on all points: that is refitMaxPoints, tested in the library).
    const heldCfg = join(dir, 'config-held.json');
    writeFileSync(heldCfg, JSON.stringify({ ...JSON.parse(readFileSync(cfgFile, 'utf8')), validation: { refitMaxPoints: 0 } }));
    const common = ['--config', heldCfg, '--workers', '0', '--json'];
    const ref = run('train', '--train', trainFile, ...common, '--save', join(dir, 'es-ref.sl'));
    expect(ref.code).toBe(0);
    const s = lastJson(ref.stdout) as { epochs: number; bestEpoch: number; validationPoints: number; history: { epoch: number; validation?: { p1: number } }[] };
    expect(s.validationPoints).toBe(150);
    expect(s.epochs).toBeGreaterThan(s.bestEpoch);
    expect(s.epochs).toBeLessThan(50);
    expect(s.history.map((h) => h.epoch)).toEqual(Array.from({ length: s.epochs }, (_, i) => i + 1));
    expect(s.history.every((h) => h.validation && h.validation.p1 >= 0 && h.validation.p1 <= 1)).toBe(true);

    const ck = join(dir, 'ck-es');
    const out = join(dir, 'es-out.sl');
    // Killed after a checkpoint in the middle of the run (the early-stopping state and the best weights so
    // far are in it), then resumed to the end.
    const killed = await runAndKill(['train', '--train', trainFile, ...common, '--save', out, '--checkpoint', ck, '--checkpoint-every', '40'], ck, 80, 20);
    expect(killed).toBe(true);
    const fin = run('train', '--resume', ck, '--json', '--save', out);
    expect(fin.code).toBe(0);
    const f = lastJson(fin.stdout) as { bestEpoch: number; epochs: number };
    expect([f.epochs, f.bestEpoch]).toEqual([s.epochs, s.bestEpoch]);
    expect(readFileSync(out).equals(readFileSync(join(dir, 'es-ref.sl')))).toBe(true);
  });

  it('eval --mode sampled reports the outputs scored per point and its time', () => {
    const e = run('eval', '--model', join(dir, 'es-ref.sl'), '--test', trainFile, '--mode', 'sampled', '--candidates', '30', '--json');
    expect(e.code).toBe(0);
    const m = lastJson(e.stdout) as { mode: string; outputsScoredPerPoint: number; outputsScoredFraction: number; seconds: number; p1: number };
    expect(m.mode).toBe('sampled');
    expect(m.outputsScoredPerPoint).toBeGreaterThanOrEqual(30);
    expect(m.outputsScoredPerPoint).toBeLessThan(100);
    expect(m.outputsScoredFraction).toBeCloseTo(m.outputsScoredPerPoint / 100, 10);
    expect(m.seconds).toBeGreaterThan(0);
    const x = lastJson(run('eval', '--model', join(dir, 'es-ref.sl'), '--test', trainFile, '--json').stdout) as { mode: string; outputsScoredPerPoint: number };
    expect([x.mode, x.outputsScoredPerPoint]).toEqual(['exact', 100]);
  });
});

describe('train stopped by a signal (Ctrl-C, or SIGTERM from a scheduler)', () => {
  it.each([
    ['SIGINT', 'Ctrl-C', 130],
    ['SIGTERM', 'SIGTERM', 143],
  ] as const)('%s (%s): stops after the batches in flight, writes a final checkpoint and the model, exits %i; --resume finishes', async (sig, shown, code) => {
    const ck = join(dir, `ck-${sig}`);
    const model = join(dir, `stopped-${sig}.sl`);
    // workers 0 and no periodic checkpoint: nothing in the loop does I/O, yet the signal must get through
    // (the loop yields to the event loop). 200 epochs would take seconds; it is stopped early.
    const log = join(dir, `stopped-${sig}.jsonl`);
    const child = spawn(process.execPath, [CLI, 'train', '--train', trainFile, '--config', cfgFile, '--epochs', '200', '--workers', '0',
      '--checkpoint', ck, '--checkpoint-every', '1h', '--save', model, '--log', log], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
    // The signal goes after the first epoch's log record, so that the run has trained (a fixed delay after
    // the start was too short on a loaded machine: stopped before its first batch, it has nothing to checkpoint).
    while (child.exitCode === null && !(existsSync(log) && readFileSync(log, 'utf8').includes('"type":"epoch"'))) await sleep(5);
    child.kill(sig);
    expect(await exited).toBe(code);
    expect(stderr).toContain(`${shown}: stopping after the batches in flight, writing a checkpoint and saving ${model}`);
    expect(stderr).toContain('(stopped early)');
    expect(stderr).not.toContain('NaN');
    expect(existsSync(model)).toBe(true);
    const files = await listCheckpoints(ck);
    expect(files).toHaveLength(1);
    const stoppedAt = files[0]!.batchesDone;
    expect(stoppedAt).toBeGreaterThan(0);
    expect(stoppedAt).toBeLessThan(200 * 24);
    const { meta } = await readCheckpoint(files[0]!.file, (c) => new Network(c));
    expect(meta.reason).toBe('abort');
    const epochs = Math.ceil(stoppedAt / 24) + 1;
    const fin = run('train', '--resume', ck, '--epochs', String(epochs), '--json', '--save', model, '--log', log);
    expect(fin.code).toBe(0);
    expect(lastJson(fin.stdout)).toMatchObject({ resumedAt: stoppedAt, batchesDone: epochs * 24, aborted: false });
  });
});

describe('interrupted while copies of the network choose the epoch count (the selection phase)', () => {
  // The selection phases the defaults have: 5-fold cross-validation below 2,000 training points (1,200
  // here; a 512-unit hidden layer keeps it a few seconds long), and with validation.refitMaxPoints a held-out
  // copy before the refit on all points (3,000 points, the default network, from a --config of training
  // options only).
  const phases = {
    kfold: { method: 'kfold', config: { inputDim: 2000, seed: 3, layers: [{ size: 512 }, { size: 100 }] }, data: () => kfoldFile },
    refit: { method: 'holdout', config: { validation: { refitMaxPoints: 20_000 } }, data: () => trainFile },
  } as const;
  type Phase = keyof typeof phases;
  let kfoldFile: string;
  /** The weights, biases, wide part and re-ranker of a model file, for a bit-for-bit comparison. */
  const modelBytes = async (file: string) => {
    const net = await Network.load(file);
    const parts = net.spec.layers.flatMap((l) => [l.weights, l.bias, ...(l.wide ? [l.wide.offsets, l.wide.labels, l.wide.weights] : [])]);
    if (net.rerank) parts.push(net.rerank.weights, net.rerank.bias);
    return Buffer.concat(parts.map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)));
  };
  const common = (phase: Phase) => ['--train', phases[phase].data(), '--config', join(dir, `sel-${phase}.json`), '--workers', '1', '--threads', '1', '--checkpoint-every', '50', '--json'];
  const reference = new Map<Phase, Buffer>();
  beforeAll(async () => {
    const synth = run('data', 'synth', '--shape', 'tiny', '--train', '1200', '--seed', '7', '--out', join(dir, 'data-1200'));
    expect(synth.code).toBe(0);
    kfoldFile = join(dir, 'data-1200', 'train.txt');
    for (const phase of Object.keys(phases) as Phase[]) {
      writeFileSync(join(dir, `sel-${phase}.json`), JSON.stringify(phases[phase].config));
      const r = run('train', ...common(phase), '--checkpoint', join(dir, `ck-sel-ref-${phase}`), '--save', join(dir, `sel-ref-${phase}.sl`));
      expect(r.code, r.stderr).toBe(0);
      expect(lastJson(r.stdout)).toMatchObject({ selection: { method: phases[phase].method } });
      reference.set(phase, await modelBytes(join(dir, `sel-ref-${phase}.sl`)));
    }
  }, 300_000);

  it.each([['kfold', 'SIGTERM'], ['kfold', 'SIGKILL'], ['refit', 'SIGTERM'], ['refit', 'SIGKILL']] as const)(
    '%s, %s: no untrained model is saved; the checkpoint of the phase\'s start resumes to the uninterrupted run\'s model, bit for bit',
    async (phase, sig) => {
      const ck = join(dir, `ck-sel-${phase}-${sig}`), model = join(dir, `sel-${phase}-${sig}.sl`);
      const child = spawn(process.execPath, [CLI, 'train', ...common(phase), '--checkpoint', ck, '--save', model], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
      // The checkpoint of the phase's start is written before the copies train their first batch (the
      // progress line may come too late: off a terminal it is printed every 5 s).
      while (!existsSync(ck) || (await listCheckpoints(ck)).length === 0) await sleep(5);
      await sleep(400);
      child.kill(sig);
      const code = await exited;
      expect(existsSync(model)).toBe(false);
      const [ckpt] = await listCheckpoints(ck);
      expect(ckpt, stderr).toBeDefined();
      const { meta } = await readCheckpoint(ckpt!.file, (c) => new Network(c));
      expect(meta.position).toEqual({ epoch: 0, batch: 0, batchesDone: 0, phase: 'selection' });
      if (sig === 'SIGTERM') {
        expect(code, stderr).toBe(143);
        expect(meta.reason).toBe('abort');
        expect(stderr).toContain('SIGTERM: stopping after the batches in flight, writing a checkpoint (nothing is trained yet: no model is saved)');
        expect(stderr).toContain(`sublinear: stopped while choosing the epoch count on copies of the network, before the network itself trained: there is no trained model, so ${model} is not written; train --resume ${ck} runs it from its start (${ckpt!.file})\n`);
      } else {
        expect(meta.reason).toBe('start'); // written before the selection began
      }
      const fin = run('train', '--resume', ck, '--json', '--save', model);
      expect(fin.code, fin.stderr).toBe(0);
      expect(lastJson(fin.stdout)).toMatchObject({ selection: { method: phases[phase].method } });
      expect((await modelBytes(model)).equals(reference.get(phase)!)).toBe(true);
    },
    300_000,
  );
});

describe('a second signal', () => {
  it('exits at once (143) saying what is not saved and which checkpoint the run goes on from', async () => {
    // Batches long enough (3000 points through 1024 hidden units, one thread) that the second SIGTERM
    // arrives while the first one still waits for the batch in flight, before anything is saved.
    const cfg = join(dir, 'slow.json');
    writeFileSync(cfg, JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 1024 }, { size: 100 }] }));
    const ck = join(dir, 'ck-twice');
    const model = join(dir, 'twice.sl');
    const child = spawn(process.execPath, [CLI, 'train', '--train', trainFile, '--config', cfg, '--epochs', '100', '--batch', '3000', '--workers', '1', '--threads', '1',
      '--checkpoint', ck, '--checkpoint-every', '1', '--save', model], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
    while (!existsSync(ck) || (await listCheckpoints(ck)).length === 0) await sleep(5);
    child.kill('SIGTERM');
    while (!stderr.includes('SIGTERM: stopping after the batches in flight')) await sleep(2);
    child.kill('SIGTERM');
    const code = await exited;
    expect(code, stderr).toBe(143);
    const said = /SIGTERM again: exiting at once\. (.*) is not saved; the newest checkpoint is (.*) \(train --resume (.*) goes on from it\)\n/.exec(stderr);
    expect(said, stderr).not.toBeNull();
    expect(said![1]).toBe(model);
    expect(said![3]).toBe(ck);
    expect(existsSync(model)).toBe(false);
    // The checkpoint it names is whole and loads.
    expect((await listCheckpoints(ck)).map((c) => c.file)).toContain(said![2]);
    const { meta } = await readCheckpoint(said![2]!, (c) => new Network(c));
    expect(meta.position.batchesDone).toBeGreaterThan(0);
  }, 120_000);
});

describe('train --resume settings', () => {
  it('flags given again override the saved ones; a finished run is refused, --epochs extends it', async () => {
    const ck = join(dir, 'ck2');
    const first = run('train', '--train', trainFile, '--config', cfgFile, '--epochs', '2', '--workers', '0', '--checkpoint', ck, '--checkpoint-every', '1h', '--json');
    expect(first.code).toBe(0);
    expect(readdirSync(ck)).toEqual([checkpointName(48)]);
    const again = run('train', '--resume', ck, '--json');
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`sublinear: ${join(ck, checkpointName(48))} is the end of a run that finished its 2 epoch(s): there is nothing to resume; --epochs n with n > 2 trains it further\n`);
    const more = run('train', '--resume', ck, '--epochs', '3', '--json');
    expect(more.code).toBe(0);
    expect(lastJson(more.stdout)).toMatchObject({ batchesDone: 72, samples: 3000, epochs: 3, workers: 0 });
    expect(readdirSync(ck).sort()).toEqual([checkpointName(48), checkpointName(72)]);
  });

  it('usage errors', () => {
    const cases: [string[], string][] = [
      [['train'], 'missing required option --train (or --resume <dir>)'],
      [['train', '--train', trainFile, '--checkpoint-every', '5'], '--checkpoint-every needs --checkpoint <dir>'],
      [['train', '--train', trainFile, '--checkpoint', join(dir, 'x'), '--checkpoint-every', 'soon'],
        "option --checkpoint-every expects a number of batches or a duration like 90s, 10m, 1h but received 'soon'"],
      [['train', '--resume', join(dir, 'ck2'), '--config', cfgFile], '--config cannot be combined with --resume: the network configuration comes from the checkpoint'],
      [['train', '--resume', join(dir, 'ck2'), '--seed', '3'], '--seed cannot be combined with --resume: the seed comes from the checkpoint'],
    ];
    for (const [args, message] of cases) {
      const r = run(...args);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 2, stderr: `sublinear train: ${message}\nRun 'sublinear train --help' for usage.\n` });
    }
  });

  it('a missing checkpoint directory is a runtime error', () => {
    const r = run('train', '--resume', join(dir, 'nope'));
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: `sublinear: ${join(dir, 'nope')}: no such checkpoint directory\n` });
  });
});

describe('train --max-memory', () => {
  /** The message checkMemory refuses `plan` with under a limit of `maxBytes` ('' if it fits). */
  function memoryRefusal(plan: MemoryPlan, maxBytes: number): string {
    try {
      checkMemory(plan, { maxBytes });
      return '';
    } catch (e) {
      return (e as Error).message;
    }
  }

  it('exits 1 before allocating, naming the largest parts', async () => {
    // 30 MB: room to read the data (16.8 MB of read buffers, ~1 MB of data), not to train on it.
    const r = run('train', '--train', trainFile, '--workers', '2', '--max-memory', '30MB');
    expect(r.code).toBe(1);
    // The message the memory plan gives for this data and the default network (the defaults rule for this
    // small shape, dense 100 outputs), with its best-epoch weights (held-out selection, no copy: refitMaxPoints 0).
    const data = await readXC(trainFile);
    const def = defaultConfig({ features: data.features, labels: data.labels, points: data.points, nnz: data.offsets[data.points]! });
    const plan = planMemory({
      inputDim: featuresOf(data, data.features).length, // layer 0 holds the rows of the training data's features (input map)
      layers: def.layers.map((l) => ({ size: l.size })),
      dataset: { nnz: data.offsets[data.points]!, labelNnz: data.labelOffsets[data.points]!, points: data.points },
      workers: 2,
      bestWeights: true,
    });
    // The reader's two buffers, each the file's size + 1 (a file smaller than a read chunk).
    addPart(plan, 'read buffers', 2 * (statSync(trainFile).size + 1));
    const expected = memoryRefusal(plan, 30e6);
    expect(def.layers[0]!.size).toBe(1024);
    expect(r.stderr).toBe(`sublinear: ${expected}\n`);
    expect(r.stderr).toMatch(
      /^sublinear: Not enough memory: the configuration needs [\d.]+ MB \(layer 0 weights\+Adam 24\.2 MB, worker scratch \(2 workers\) [\d.]+ MB, best-epoch weights [\d.]+ MB, \.\.\.\) but the limit is 30\.0 MB \(--max-memory\)\n$/,
    );
  });

  it('--resume checks the checkpoint\'s network before allocating it, and leaves the checkpoints alone', async () => {
    const ck = join(dir, 'ck-mem');
    const first = run('train', '--train', trainFile, '--config', cfgFile, '--epochs', '1', '--workers', '0', '--checkpoint', ck, '--checkpoint-every', '1h', '--json');
    expect(first.code).toBe(0);
    const before = readdirSync(ck).sort();
    const r = run('train', '--resume', ck, '--workers', '2', '--max-memory', '1kB');
    // The network alone (no training data: it is read only after the checkpoint is loaded), plus its hash
    // functions, which the loader counts; the message names the checkpoint file.
    // (Layer 0 holds the rows of the training data's features: the input map.)
    const cfg = JSON.parse(readFileSync(cfgFile, 'utf8')) as NetworkConfig, data = await readXC(trainFile);
    const plan = planNetworkMemory(resolveConfig({ ...cfg, inputDim: featuresOf(data, cfg.inputDim ?? data.features).length }), 2);
    const expected = memoryRefusal(plan, 1e3);
    expect(expected).toMatch(/^Not enough memory: /);
    const file = join(ck, before.find((n) => /^ckpt-\d+\.bin$/.test(n))!);
    expect(r.code).toBe(1);
    const top = expected.slice(expected.indexOf('(') + 1, expected.indexOf(',')); // the largest part, e.g. "layer 0 weights+Adam 1.16 MB"
    expect(r.stderr).toMatch(new RegExp(`^sublinear: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: Not enough memory: the configuration needs [\\d.]+ MB \\(${top.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, .*\\) but the limit is 1\\.00 kB \\(--max-memory\\)\n$`));
    expect(r.stderr).not.toContain('training data');
    expect(readdirSync(ck).sort()).toEqual(before); // nothing renamed to .corrupt
  });
});
