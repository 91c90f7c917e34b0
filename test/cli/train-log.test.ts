// What `train` reports about a run: `--log` writes one JSON line per epoch as it ends and a summary line
// (with the saved model's path); `--json` carries the same per-epoch history, each test evaluation made
// by --eval-every kept, and the final metrics reuse the last one instead of evaluating twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let dir: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/train']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-log-'));
  expect(run('data', 'synth', '--shape', 'tiny', '--train', '2000', '--test', '300', '--seed', '5', '--out', dir).code).toBe(0);
  writeFileSync(join(dir, 'cfg.json'), JSON.stringify({ layers: [{ size: 32 }, { size: 100 }] }));
  writeFileSync(join(dir, 'rerank.json'), JSON.stringify({ layers: [{ size: 32 }, { size: 100, rerank: {} }] }));
  writeFileSync(join(dir, 'refit.json'), JSON.stringify({ layers: [{ size: 32 }, { size: 100 }], validation: { refitMaxPoints: 20_000 } }));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: dir ?? ROOT });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('train --json phases and memory', () => {
  it('says where the whole command spent its time, phase by phase, and what each part of memory was planned at', () => {
    const r = run('train', '--train', 'train.txt', '--test', 'test.txt', '--config', 'rerank.json', '--save', 'phases.sl', '--json');
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout.trimEnd().split('\n').at(-1)!) as { phases: Record<string, number>; memory: { parts: Record<string, number>; plannedBytes: number }; trainSeconds: number };
    const p = s.phases;
    // The phases of a held-out run with a re-ranker, in the order they ran, then what none covers and the total.
    expect(Object.keys(p)).toEqual(['read', 'allocate', 'heldout', 'train', 'rerank.shortlists', 'rerank.classifiers', 'rerank.weight', 'calibration', 'save', 'test', 'other', 'total']);
    expect(Object.values(p).every((x) => Number.isFinite(x) && x >= 0)).toBe(true);
    expect(p.train).toBeCloseTo(s.trainSeconds, 2);
    const counted = Object.entries(p).filter(([k]) => k !== 'total').reduce((a, [, v]) => a + v, 0);
    expect(counted).toBeCloseTo(p.total!, 1);
    // The memory plan's parts, in bytes, summing to the planned total.
    expect(s.memory.parts['layer 0 weights+Adam']).toBeGreaterThan(0);
    expect(Object.values(s.memory.parts).reduce((a, b) => a + b, 0)).toBe(s.memory.plannedBytes);
    // The progress output says which phase runs after the epochs.
    for (const line of ["re-ranker: the network's shortlist of every training point", 're-ranker: training the per-label classifiers', 'saving the model', 'evaluating the test set']) {
      expect(r.stderr).toContain(`${line}\n`);
    }
  });
});

describe('train --log and --json history', () => {
  it('one line per epoch with loss, samples/s and test metrics, then a summary naming the model', () => {
    const r = run('train', '--train', 'train.txt', '--test', 'test.txt', '--config', 'cfg.json', '--epochs', '3', '--eval-every', '1',
      '--log', 'history.jsonl', '--save', 'model.sl', '--json');
    expect(r.code).toBe(0);
    const lines = readFileSync(join(dir, 'history.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
    expect(lines.map((l) => [l.type, l.epoch])).toEqual([['epoch', 1], ['epoch', 2], ['epoch', 3], ['summary', undefined]]);
    for (const l of lines.slice(0, 3)) {
      expect(l.loss).toBeGreaterThan(0);
      expect(l.samplesPerSec).toBeGreaterThan(0);
      expect(l.test.p1).toBeGreaterThanOrEqual(0);
    }
    expect(lines[3]!.model).toBe(join(dir, 'model.sl'));
    const json = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, any>;
    expect(json.model).toBe(join(dir, 'model.sl'));
    expect(json.history).toEqual(lines.slice(0, 3).map(({ type: _t, ...rest }) => rest));
    // The last epoch's evaluation is the final one (same weights): not computed a second time, so even its
    // timing is the same number.
    expect(json.predictSeconds).toBe(json.history[2].test.predictSeconds);
    expect(json.p1).toBe(json.history[2].test.p1);
    // Fixed epochs hold no points out: nothing to calibrate on, so no calibration phase or line, only why not.
    expect(json.phases.calibration).toBeUndefined();
    expect(r.stderr).not.toContain('calibrating the probabilities');
    expect(r.stderr).toContain('probabilities not calibrated: no held-out points (validation is off)');
  });

  it('up to refitMaxPoints points, a copy chooses the epochs on the held-out slice, then all points train: said on stderr and in --json', () => {
    const r = run('train', '--train', 'train.txt', '--config', 'refit.json', '--log', 'refit.jsonl', '--json');
    expect(r.code).toBe(0);
    const m = /epochs chosen on 100 held-out points by a copy of the network: (\d+) \(held-out P@1 [\d.]+; (\d+) epochs trained\), then trained on all 2000 points\n/.exec(r.stderr);
    expect(m, r.stderr).not.toBeNull();
    const summary = JSON.parse(r.stdout.trimEnd().split('\n').at(-1)!) as Record<string, any>;
    expect(summary.selection).toMatchObject({ method: 'holdout', points: 100, epochs: Number(m![1]) });
    expect(summary.selection.refit.p1.length).toBe(Number(m![2]));
    expect(summary.epochs).toBe(Number(m![1]));
    const epochs = readFileSync(join(dir, 'refit.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>).filter((l) => l.type === 'epoch');
    expect(epochs.length).toBe(Number(m![1])); // the run on all points: no held-out scores
    expect(epochs.every((e) => e.validation === undefined)).toBe(true);
  });

  it('held-out validation epochs are logged with their P@k and learning rate', () => {
    // One held-out run (refitMaxPoints 0: no second run on all points, whose epochs have no held-out scores).
    writeFileSync(join(dir, 'cfg-held.json'), JSON.stringify({ layers: [{ size: 32 }, { size: 100 }], validation: { refitMaxPoints: 0 } }));
    const r = run('train', '--train', 'train.txt', '--config', 'cfg-held.json', '--log', 'val.jsonl', '--save', 'val.sl', '--quiet');
    expect([r.code, r.stderr]).toEqual([0, '']);
    const lines = readFileSync(join(dir, 'val.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
    const epochs = lines.filter((l) => l.type === 'epoch');
    expect(epochs.length).toBeGreaterThanOrEqual(4); // patience 3 after the best epoch
    for (const e of epochs) expect(e.validation).toMatchObject({ p1: expect.any(Number), lr: expect.any(Number) });
    expect(lines.at(-1)).toMatchObject({ type: 'summary', bestEpoch: expect.any(Number) });
  });

  it('a run refused by the checkpoint directory leaves the log of the run before it alone', () => {
    const args = ['train', '--train', 'train.txt', '--config', 'cfg.json', '--epochs', '1', '--checkpoint', 'ck', '--log', 'ck.jsonl', '--quiet'];
    expect(run(...args).code).toBe(0);
    const before = readFileSync(join(dir, 'ck.jsonl'), 'utf8');
    expect(before).toContain('"type":"summary"');
    // The same command again: ck holds the first run's checkpoints, so this fresh run is refused, after its
    // data was read; the log is opened only at the first epoch record, so it is not truncated.
    const again = run(...args);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('ck');
    expect(readFileSync(join(dir, 'ck.jsonl'), 'utf8')).toBe(before);
  });
});

