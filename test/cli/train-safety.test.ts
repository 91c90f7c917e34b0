// `sublinear train` never destroys what it was not asked to write, and says what happened: outputs must be
// regular files (a device or FIFO given as --save or --log is refused before any data is read); a --log
// that fills its disk costs the log, not the run; a resumed run writes only the outputs its command line
// names, and shows the inputs its checkpoint records before reading them; --quiet keeps the result on
// stdout; a finished or early-stopped run is not "resumed" into a rewrite of --save; the checkpoint
// directory's lock and contents are checked before the data is read; the log and the JSON history of a
// crashed and resumed run describe every epoch once; a --save path replaced during training costs the file
// name, not the model (it is kept next to it, exit 1). Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from './built.js';
import { checkpointName } from '../../src/train/checkpoint.js';
import { LOCK_FILE } from '../../src/train/lock.js';

const root = mkdtempSync(join(tmpdir(), 'sublinear-safety-'));
const isRoot = process.getuid?.() === 0;
let trainFile: string, testFile: string, cfgFile: string, badFile: string;

beforeAll(() => {
  assertBuilt(['src/cli', 'src/train', 'src/network', 'src/util']);
  const synth = run('data', 'synth', '--shape', 'tiny', '--train', '3000', '--test', '300', '--seed', '7', '--out', join(root, 'data'));
  expect(synth.code).toBe(0);
  trainFile = join(root, 'data', 'train.txt');
  testFile = join(root, 'data', 'test.txt');
  cfgFile = join(root, 'config.json');
  writeFileSync(cfgFile, JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 48 }, { size: 100, sampling: { hash: 'dwta', K: 3, L: 8, budget: 16 } }] }));
  // Data whose reading fails at once: an error about it means the data was read before the check at hand.
  badFile = join(root, 'bad.txt');
  writeFileSync(badFile, 'not a header\n');
});
const mounts: string[] = [];
afterAll(() => {
  for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
  rmSync(root, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT, timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
function lastJson(stdout: string): Record<string, unknown> {
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}
const tiny = () => ['--config', cfgFile, '--workers', '0'];
let n = 0;
const fresh = (name: string) => join(root, `${name}-${n++}`);

describe('outputs are regular files or new names (1)', () => {
  it.skipIf(!isRoot)('a character device as --save is refused before any data is read, and left as it was', () => {
    const dev = fresh('dev-full');
    // A node of /dev/full's numbers in a temporary directory (never a real /dev node).
    expect(spawnSync('mknod', [dev, 'c', '1', '7']).status).toBe(0);
    const r = run('train', '--train', badFile, ...tiny(), '--save', dev);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: `sublinear: --save ${dev} is a character device, not a regular file: refusing to replace it\n` });
    const st = lstatSync(dev);
    expect(st.isCharacterDevice()).toBe(true);
    expect(st.rdev).toBe(statSync('/dev/full').rdev);
  });

  it('a FIFO as --log or --save is refused (it would block or be replaced)', () => {
    const fifo = fresh('fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const r = run('train', '--train', badFile, ...tiny(), '--log', fifo);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: `sublinear: --log ${fifo} is a FIFO (named pipe), not a regular file: refusing to replace it\n` });
    const s = run('train', '--train', badFile, ...tiny(), '--save', fifo);
    expect(s.stderr).toBe(`sublinear: --save ${fifo} is a FIFO (named pipe), not a regular file: refusing to replace it\n`);
    expect(lstatSync(fifo).isFIFO()).toBe(true);
  });

  it('a symbolic link is followed to the regular file it names (replaced; the link stays); a dangling one is refused', () => {
    const dir = fresh('links');
    mkdirSync(join(dir, 'models'), { recursive: true });
    const real = join(dir, 'models', 'real.sl');
    writeFileSync(real, 'old');
    const link = join(dir, 'link.sl');
    spawnSync('ln', ['-s', real, link]);
    const r = run('train', '--train', trainFile, ...tiny(), '--epochs', '1', '--save', link, '--quiet');
    expect(r.code).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(real);
    expect(readFileSync(real).subarray(0, 3).toString()).not.toBe('old');
    expect(readdirSync(dir).sort()).toEqual(['link.sl', 'models']); // no temporary file left next to the link
    const dangling = join(dir, 'dangling.sl');
    spawnSync('ln', ['-s', join(dir, 'nowhere.sl'), dangling]);
    const d = run('train', '--train', badFile, ...tiny(), '--save', dangling);
    expect(d.stderr).toBe(`sublinear: --save ${dangling} is a symbolic link to nothing (its target does not exist): refusing to write through it\n`);
    expect(existsSync(join(dir, 'nowhere.sl'))).toBe(false);
  });
});

describe('a --log that cannot be written (2)', () => {
  const mount = (): string | null => {
    const dir = fresh('tmpfs');
    mkdirSync(dir);
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]).status !== 0) return null;
    mounts.push(dir);
    return dir;
  };
  const disk = isRoot ? mount() : null;
  if (!disk) console.warn('cannot mount a tmpfs (needs root): the full --log disk test is skipped');

  it.skipIf(!disk)('warns naming the file, trains on, saves the model and counts the lost records', () => {
    // Fill the disk completely (then even a short line cannot be written).
    const fd = openSync(join(disk!, 'filler'), 'w');
    for (const size of [65536, 4096, 1]) {
      try {
        for (;;) writeSync(fd, Buffer.alloc(size, 1));
      } catch {
        // ENOSPC at this size: go on with smaller writes
      }
    }
    closeSync(fd);
    const log = join(disk!, 'history.jsonl');
    const model = fresh('full-log.sl');
    const r = run('train', '--train', trainFile, ...tiny(), '--epochs', '3', '--log', log, '--save', model, '--json');
    expect(r.stderr).toContain(`sublinear: warning: cannot write --log ${log}: no space left on device. Training goes on; the log stops here ` +
      '(it is empty; logFailures in the summary counts the records not written)\n');
    expect(r.code).toBe(0);
    expect(existsSync(model)).toBe(true);
    // 3 epoch records and the summary line.
    expect(lastJson(r.stdout)).toMatchObject({ epochs: 3, logFailures: 4 });
    expect(readFileSync(log, 'utf8')).toBe('');
    // The text summary counts them too, the summary record included: the same number as the JSON.
    expect(r.stderr).toContain(`--log ${log}: 4 record(s) not written\n`);
  });
});

describe('a --save that cannot be written at the end keeps the model (2b)', () => {
  it('the path replaced by a directory during training: the model goes next to it, is said, and the exit status is 1', async () => {
    const dir = fresh('replaced');
    mkdirSync(dir);
    const save = join(dir, 'model.sl');
    const child = spawn(process.execPath, [CLI, 'train', '--train', trainFile, ...tiny(), '--epochs', '4', '--save', save, '--json'], { cwd: ROOT });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((res) => child.on('exit', res));
    // After the pre-flight checks (the network line follows them), before the save.
    while (!stderr.includes('network: ')) await new Promise((r) => setTimeout(r, 2));
    mkdirSync(save);
    expect(await exited, stderr).toBe(1);
    const m = /sublinear: cannot save the model to (.*): \1 is a directory, not a regular file: refusing to replace it\. The model is saved to (.*) instead: move it where it belongs\n/.exec(stderr);
    expect(m, stderr).not.toBeNull();
    expect(m![2]).toMatch(new RegExp(`^${dir}/model\\.rescued-[0-9a-z]+-\\d+\\.sl$`));
    expect(lastJson(stdout)).toMatchObject({ model: m![2], saveError: `${save}: ${save} is a directory, not a regular file: refusing to replace it` });
    const ev = run('eval', '--model', m![2]!, '--test', testFile, '--json');
    expect(ev.code, ev.stderr).toBe(0);
  });
});

describe('resume trusts no output path a checkpoint records (3)', () => {
  it('refuses to write the recorded --save/--log unless named again or confirmed; shows the recorded inputs', () => {
    const dir = fresh('resume-trust');
    mkdirSync(dir);
    const ck = join(dir, 'ck'), victim = join(dir, 'victim.sl'), victimLog = join(dir, 'victim.jsonl');
    const first = run('train', '--train', trainFile, ...tiny(), '--epochs', '2', '--save', victim, '--log', victimLog, '--checkpoint', ck, '--checkpoint-every', '30', '--quiet');
    expect(first.code).toBe(0);
    const before = [readFileSync(victim), readFileSync(victimLog)];
    const file = join(ck, checkpointName(48));

    const refused = run('train', '--resume', ck, '--epochs', '3');
    expect({ code: refused.code, stderr: refused.stderr }).toEqual({
      code: 2,
      stderr: `sublinear train: ${file} records --save ${victim} and --log ${victimLog}; a resumed run writes only the files its command line names: ` +
        `give --save <file> and --log <file> again, or --use-recorded-outputs to write the recorded ones\nRun 'sublinear train --help' for usage.\n`,
    });

    const mine = join(dir, 'mine.sl');
    const named = run('train', '--resume', ck, '--epochs', '3', '--save', mine, '--log', join(dir, 'mine.jsonl'));
    expect(named.code).toBe(0);
    expect(named.stderr).toContain(`reading the data ${file} records: --train ${trainFile}\n`);
    expect(named.stderr.indexOf('reading the data')).toBeLessThan(named.stderr.indexOf('resuming from'));
    expect(existsSync(mine)).toBe(true);
    expect([readFileSync(victim), readFileSync(victimLog)]).toEqual(before);

    // The resumed run's checkpoints record the outputs it was given: confirmed, those are written.
    const mineBefore = readFileSync(mine);
    const confirmed = run('train', '--resume', ck, '--epochs', '4', '--use-recorded-outputs');
    expect(confirmed.code).toBe(0);
    expect(confirmed.stderr).toContain(`writing the outputs ${join(ck, checkpointName(72))} records (--use-recorded-outputs): --save ${mine} and --log ${join(dir, 'mine.jsonl')}\n`);
    expect(readFileSync(mine).equals(mineBefore)).toBe(false);
    expect([readFileSync(victim), readFileSync(victimLog)]).toEqual(before);
  });

  it('a recorded input that cannot be read is named as recorded', () => {
    const dir = fresh('resume-moved');
    mkdirSync(dir);
    const data = join(dir, 'train.txt');
    writeFileSync(data, readFileSync(trainFile));
    const ck = join(dir, 'ck');
    expect(run('train', '--train', data, ...tiny(), '--epochs', '1', '--checkpoint', ck, '--quiet').code).toBe(0);
    unlinkSync(data);
    const r = run('train', '--resume', ck, '--epochs', '2', '--quiet');
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: `sublinear: --train (recorded in ${join(ck, checkpointName(24))}) ${data}: no such file or directory\n` });
  });

  it('a recorded input that is not data is named, not quoted; named on the command line, its problem is shown', () => {
    const dir = fresh('resume-secret');
    mkdirSync(dir);
    const data = join(dir, 'train.txt');
    writeFileSync(data, readFileSync(trainFile));
    const ck = join(dir, 'ck');
    expect(run('train', '--train', data, ...tiny(), '--epochs', '1', '--checkpoint', ck, '--quiet').code).toBe(0);
    // The recorded path now holds someone's secret (as a checkpoint from elsewhere may name any file).
    writeFileSync(data, 'root:x:0:0:secret-token\n');
    const r = run('train', '--resume', ck, '--epochs', '2', '--save', join(dir, 'm.sl'), '--quiet');
    expect({ code: r.code, stderr: r.stderr }).toEqual({
      code: 1,
      stderr: `sublinear: ${data}:1: not readable as data; its content is not shown because the path comes from the checkpoint, not the command line (give --train ${data} to see the problem)\n`,
    });
    const named = run('train', '--resume', ck, '--epochs', '2', '--train', data, '--save', join(dir, 'm.sl'), '--quiet');
    expect(named.code).toBe(1);
    expect(named.stderr).toContain('secret-token');
  });

  it('--use-recorded-outputs needs --resume', () => {
    const r = run('train', '--train', trainFile, '--use-recorded-outputs');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("sublinear train: --use-recorded-outputs needs --resume <dir>\nRun 'sublinear train --help' for usage.\n");
  });
});

describe('the result is never lost quietly (4)', () => {
  it('--quiet still prints the test metrics on stdout, and nothing on stderr', () => {
    const r = run('train', '--train', trainFile, '--test', testFile, ...tiny(), '--epochs', '1', '--quiet', '--save', fresh('q.sl'));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^test: P@1 0\.\d{4} {2}P@3 /);
    expect(r.stderr).toBe('');
  });

  it('warns when the model is kept nowhere; --save "" is a usage error', () => {
    const r = run('train', '--train', trainFile, ...tiny(), '--epochs', '1', '--quiet');
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('sublinear: warning: no --save: the trained model will not be kept (give --save <model> to keep it)\n');
    const e = run('train', '--train', trainFile, ...tiny(), '--save', '');
    expect({ code: e.code, stderr: e.stderr }).toEqual({
      code: 2, stderr: "sublinear train: option --save expects a value (<model>) but received an empty string\nRun 'sublinear train --help' for usage.\n",
    });
  });
});

describe('resuming a run with nothing left to train (6)', () => {
  it('an early-stopped run is refused with the reason, --epochs or not, and --save is not written', () => {
    const ck = fresh('ck-early');
    // One held-out run that early stopping ends (refitMaxPoints 0: no second run on all points).
    const held = fresh('held.json');
    writeFileSync(held, JSON.stringify({ ...JSON.parse(readFileSync(cfgFile, 'utf8')), validation: { refitMaxPoints: 0, schedule: 'plateau' } }));
    const first = run('train', '--train', trainFile, '--config', held, '--workers', '0', '--checkpoint', ck, '--json', '--quiet');
    expect(first.code).toBe(0);
    const s = lastJson(first.stdout) as { epochs: number; bestEpoch: number; batchesDone: number };
    expect(s.epochs).toBeLessThan(50);
    const model = fresh('early.sl');
    const r = run('train', '--resume', ck, '--epochs', '25', '--save', model);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`sublinear: ${join(ck, checkpointName(s.batchesDone))} is the end of a run that held-out validation stopped: its score did not improve ` +
      `for 3 epoch(s) after epoch ${s.bestEpoch}, whose weights it kept; there is nothing to resume (--epochs does not extend such a run). ` +
      'To train longer, start a new run (--epochs n trains exactly n epochs)\n');
    expect(existsSync(model)).toBe(false);
  });

  it("a run that ended its 'anneal' descent (the default schedule) is refused the same way, saying so", () => {
    const ck = fresh('ck-anneal');
    const first = run('train', '--train', trainFile, '--config', cfgFile, '--workers', '0', '--checkpoint', ck, '--json', '--quiet');
    expect(first.code).toBe(0);
    const s = lastJson(first.stdout) as { epochs: number; bestEpoch: number; batchesDone: number; anneal: { from: number; epochs: number } };
    expect(s.epochs).toBe(s.anneal.from + s.anneal.epochs);
    const r = run('train', '--resume', ck, '--save', fresh('anneal.sl'));
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`sublinear: ${join(ck, checkpointName(s.batchesDone))} is the end of a run that held-out validation stopped: its score stopped improving ` +
      `at epoch ${s.anneal.from} and the learning rate then fell to 0 over ${s.anneal.epochs} epoch(s); the weights of epoch ${s.bestEpoch} were kept; there is nothing to resume. ` +
      'To train longer, start a new run (--epochs n trains exactly n epochs)\n');
  });
});

describe('the checkpoint directory is checked before the data is read (7)', () => {
  it('a directory holding checkpoints is refused before reading --train', () => {
    const ck = fresh('ck-used');
    expect(run('train', '--train', trainFile, ...tiny(), '--epochs', '1', '--checkpoint', ck, '--quiet').code).toBe(0);
    const r = run('train', '--train', badFile, ...tiny(), '--checkpoint', ck);
    expect({ code: r.code, stderr: r.stderr }).toEqual({
      code: 1,
      stderr: `sublinear: checkpoint directory ${ck} already holds checkpoints of another run (newest: ${join(ck, checkpointName(24))}); ` +
        `resume them (sublinear train --resume ${ck}) or use an empty directory\n`,
    });
  });

  it('a directory locked by a live run is refused before reading --train', () => {
    const ck = fresh('ck-locked');
    mkdirSync(ck);
    // This test process is alive: its pid holds the lock.
    writeFileSync(join(ck, LOCK_FILE), JSON.stringify({ pid: process.pid, hostname: hostname(), since: new Date().toISOString(), token: 'abcd' }) + '\n');
    const r = run('train', '--train', badFile, ...tiny(), '--checkpoint', ck);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`checkpoint directory ${ck} is in use by process ${process.pid} on this host`);
    expect(r.stderr).not.toContain(badFile);
  });
});

describe('progress of a long run (8)', () => {
  it('--json does not silence stderr: the run says what it trains', () => {
    const r = run('train', '--train', trainFile, ...tiny(), '--epochs', '1', '--json', '--save', fresh('j.sl'));
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('network: 2000 -> 48 -> 100 (dwta K=3 L=8)');
    expect(lastJson(r.stdout)).toMatchObject({ epochs: 1 });
  });
});

describe('a crashed and resumed run is logged once (9)', () => {
  it('--log and the JSON history hold every epoch exactly once', () => {
    const dir = fresh('crash-log');
    mkdirSync(dir);
    const ck = join(dir, 'ck'), log = join(dir, 'h.jsonl'), model = join(dir, 'm.sl');
    // 24 batches per epoch; checkpoints at 30 and 60 and the final one at 72 (two kept: 60 and 72).
    const first = run('train', '--train', trainFile, ...tiny(), '--epochs', '3', '--checkpoint', ck, '--checkpoint-every', '30', '--log', log, '--save', model, '--quiet');
    expect(first.code).toBe(0);
    // A crash after epoch 3 was logged but before its checkpoint: the newest checkpoint is at batch 60
    // (epoch 3, batch 12), and the log already holds epoch 3.
    unlinkSync(join(ck, checkpointName(72)));
    const logged = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; epoch?: number; trainSeconds?: number });
    expect(logged.map((r) => r.epoch ?? r.type)).toEqual([1, 2, 3, 'summary']);
    const r = run('train', '--resume', ck, '--log', log, '--save', model, '--json');
    expect(r.code).toBe(0);
    const after = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; epoch?: number; trainSeconds?: number });
    expect(after.map((x) => x.epoch ?? x.type)).toEqual([1, 2, 3, 'summary']);
    expect(after.slice(0, 2)).toEqual(logged.slice(0, 2)); // the epochs before the checkpoint, as first logged
    expect(after[2]!.trainSeconds!).toBeGreaterThan(after[1]!.trainSeconds!);
    const s = lastJson(r.stdout) as { history: { epoch: number }[]; resumedAt: number };
    expect(s.resumedAt).toBe(60);
    expect(s.history.map((h) => h.epoch)).toEqual([1, 2, 3]);
  });
});
