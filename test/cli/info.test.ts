// `sublinear info <file>` (src/cli/info.ts): what a model or checkpoint holds and how it was trained,
// read from the file's header after its checksum. Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from './built.js';
import { Network } from '../../src/network/network.js';
import { checkpointName } from '../../src/train/checkpoint.js';

const dir = mkdtempSync(join(tmpdir(), 'sublinear-info-'));
const tiny = join(ROOT, 'datasets/fixtures/tiny.txt');
beforeAll(() => assertBuilt(['src/cli', 'src/network']));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: dir, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('sublinear info', () => {
  it('a model saved by train: network, sizes, labels, the training data and run', () => {
    writeFileSync(join(dir, 'cfg.json'), JSON.stringify({ seed: 5, layers: [{ size: 16 }, { size: 100, sampling: { hash: 'dwta', K: 2, L: 4 } }] }));
    const t = run('train', '--train', tiny, '--config', 'cfg.json', '--epochs', '2', '--batch', '8', '--lr', '0.005', '--workers', '0',
      '--save', 'm.sl', '--checkpoint', 'ck', '--quiet');
    expect(t.code).toBe(0);
    const r = run('info', 'm.sl');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    const held = new Set(readFileSync(tiny, 'utf8').trim().split('\n').slice(1).flatMap((l) => l.split(' ').slice(1).map((p) => p.split(':')[0]))).size;
    expect(lines[0]).toMatch(/^m\.sl: sublinear model \(format 1, model version 3\), [\d.]+ kB, checksum ok$/);
    expect(lines.slice(1, 5)).toEqual([
      'network: 2000 -> 16 (relu) -> 100 (softmax, dwta K=2 L=4); seed 5',
      // Layer 0 holds the rows of the features the training data holds (the input map).
      `parameters: ${(held * 16 + 16 + 16 * 100 + 100).toLocaleString('en-US')}; labels: 100` + (held < 2000 ? `; layer-0 rows for the ${held.toLocaleString('en-US')} features the training data held` : ''),
      'trained: 6 batches on 20 points',
      `data: ${tiny} (20 points, 2,000 features, 100 labels, ${readFileSync(tiny, 'utf8').trim().split('\n').slice(1).reduce((a, l) => a + l.split(' ').length - 1, 0)} nonzeros)`,
    ]);
    expect(lines[5]).toBe('training: 2 epoch(s); batch 8; lr 0.005');
    expect(lines[6]).toMatch(/^saved by sublinear \d+\.\d+\.\d+$/);
    const j = JSON.parse(run('info', 'm.sl', '--json').stdout) as { kind: string; labels: number; training: { data: { file: string }; epochs: number } };
    expect(j).toMatchObject({ kind: 'model', labels: 100, training: { data: { file: tiny }, epochs: 2 } });

    const c = run('info', join('ck', checkpointName(6)));
    expect(c.code).toBe(0);
    expect(c.stdout).toContain('sublinear checkpoint (format 1)');
    expect(c.stdout).toMatch(/\nposition: epoch 3, batch 0 \(end; written \d{4}-/);
    expect(c.stdout).toContain('\noptions: 2 epochs; batch 8; lr 0.005\n');
    expect(c.stdout).toMatch(new RegExp(`\\ndata: ${tiny.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(20 points, 2,000 features, 100 labels; fingerprint [0-9a-f]{16}\\)\\n`));
  });

  it('a model saved without a summary says so; a damaged or foreign file is refused naming it', async () => {
    const net = new Network({ inputDim: 10, seed: 1, layers: [{ size: 4 }, { size: 3 }] });
    await net.save(join(dir, 'api.sl'));
    expect(run('info', 'api.sl').stdout).toContain('\ntraining: not recorded (saved without a summary)\n');
    const bytes = readFileSync(join(dir, 'api.sl'));
    bytes[bytes.length - 20]! ^= 1;
    writeFileSync(join(dir, 'bad.sl'), bytes);
    const bad = run('info', 'bad.sl');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^sublinear: bad\.sl: checksum mismatch/);
    expect(run('info', tiny).stderr).toBe(`sublinear: ${tiny}: not a sublinear file (bad magic)\n`);
  });
});
