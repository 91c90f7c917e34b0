// `sublinear serve` as a user runs it: the compiled CLI on an ephemeral port, a real request, then SIGTERM
// while requests are in flight: they are answered, the process exits 0. Flag errors exit 2.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { Network } from '../../src/network/network.js';
import { synthesize } from '../../src/datasets/index.js';
import { fit } from '../../src/train/fit-network.js';
import { copyFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

const autocannon = createRequire(import.meta.url)('autocannon') as (o: Record<string, unknown>) => Promise<{ requests: { total: number }; non2xx: number; errors: number; timeouts: number }>;

/** Starts `sublinear serve <args>`; resolves with the child, its URL and its stderr so far. */
async function start(args: string[]): Promise<{ child: ReturnType<typeof spawn>; url: string; stderr: () => string; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...args], { cwd: ROOT });
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /^listening on (http:\S+)\n/.exec(out);
      if (m) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
  return { child, url, stderr: () => err, exited };
}

let dir: string;
let model: string;
const data = synthesize({ shape: 'tiny', points: 600, seed: 3 });
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/serve']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-serve-'));
  model = join(dir, 'm.sl');
  const net = new Network({ inputDim: data.features, seed: 1, layers: [{ size: 16 }, { size: data.labels }] });
  await fit(net, data, { epochs: 1, workers: 0 });
  await net.save(model);
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('sublinear serve', () => {
  it('listens, answers like Network.predict, and on SIGTERM answers the requests in flight and exits 0', async () => {
    const child = spawn(process.execPath, [CLI, 'serve', '--model', model, '--port', '0', '--workers', '1', '--max-batch', '4'], { cwd: ROOT });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        const m = /^listening on (http:\S+)\n/.exec(out);
        if (m) resolve(m[1]!);
      });
      void exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
    });
    const f: Record<string, number> = {};
    for (let p = data.offsets[0]!; p < data.offsets[1]!; p++) f[String(data.indices[p])] = data.values[p]!;
    const body = JSON.stringify({ features: f, k: 2 });
    const first = (await (await fetch(`${url}/predict`, { method: 'POST', body })).json()) as { labels: number[] };
    const want = await (await Network.load(model)).predict(data, { k: 2, workers: 0 });
    expect(first.labels).toEqual(Array.from(want.labels.subarray(0, 2)));

    const inFlight = Array.from({ length: 30 }, () => fetch(`${url}/predict`, { method: 'POST', body }).then((r) => r.status, () => 'refused'));
    // Signal once the first of them is answered, while the others are queued or on their way.
    await Promise.race(inFlight);
    child.kill('SIGTERM');
    const statuses = await Promise.all(inFlight);
    expect(await exited).toBe(0);
    expect(statuses.every((s) => s === 200 || s === 503 || s === 'refused')).toBe(true);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    expect(stderr).toContain('SIGTERM: answering the requests received, then stopping');
    expect(stderr).toContain('sublinear serve: stopped');
  }, 60_000);

  it('flag errors exit 2 with the reason', () => {
    const r = spawnSync(process.execPath, [CLI, 'serve', '--model', model, '--max-body', 'lots'], { encoding: 'utf8', cwd: ROOT });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('Expected a size like 2.5GB, 512M, 4GiB or 1e9 for --max-body but received "lots"');
    const r2 = spawnSync(process.execPath, [CLI, 'serve', '--model', join(dir, 'missing.sl')], { encoding: 'utf8', cwd: ROOT });
    expect(r2.status).toBe(1);
    expect(r2.stderr).toContain('missing.sl');
  });

  it('SIGHUP reloads the model file under autocannon load without a failed request', async () => {
    const file = join(dir, 'live.sl');
    await copyFile(model, file);
    const s = await start(['--model', file, '--workers', '2']);
    try {
      const f: Record<string, number> = {};
      for (let p = data.offsets[0]!; p < data.offsets[1]!; p++) f[String(data.indices[p])] = data.values[p]!;
      const body = JSON.stringify({ features: f, k: 2 });
      const load = autocannon({ url: s.url, connections: 8, duration: 3, requests: [{ method: 'POST', path: '/predict', headers: { 'content-type': 'application/json' }, body }] });
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 600));
        s.child.kill('SIGHUP');
      }
      const result = await load;
      expect(result.requests.total).toBeGreaterThan(50);
      expect({ non2xx: result.non2xx, errors: result.errors, timeouts: result.timeouts }).toEqual({ non2xx: 0, errors: 0, timeouts: 0 });
      await new Promise((r) => setTimeout(r, 300));
      expect(s.stderr().match(/sublinear serve: reloaded .*live\.sl: \d+ labels/g)).toHaveLength(3);
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toContain('sublinear_model_reloads_total{result="ok"} 3');
    } finally {
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
    }
  }, 60_000);

  it('--token FILE guards every route but liveness; beyond loopback without a token it refuses to start (exit 2)', async () => {
    const tokenFile = join(dir, 'token.txt');
    await writeFile(tokenFile, 'cli-token-0123456789abcdef\n');
    const s = await start(['--model', model, '--workers', '0', '--token', tokenFile, '--quiet']);
    try {
      expect((await fetch(`${s.url}/model`)).status).toBe(401);
      expect((await fetch(`${s.url}/model`, { headers: { authorization: 'Bearer cli-token-0123456789abcdef' } })).status).toBe(200);
      expect((await fetch(`${s.url}/v2/health/live`)).status).toBe(200);
    } finally {
      s.child.kill('SIGTERM');
      await s.exited;
    }
    const open = spawnSync(process.execPath, [CLI, 'serve', '--model', model, '--host', '0.0.0.0', '--port', '0'], { encoding: 'utf8', cwd: ROOT });
    expect(open.status).toBe(2);
    expect(open.stderr).toContain('refusing to listen on 0.0.0.0 without a token');
    await writeFile(tokenFile, 'short\n');
    const short = spawnSync(process.execPath, [CLI, 'serve', '--model', model, '--token', tokenFile], { encoding: 'utf8', cwd: ROOT });
    expect(short.status).toBe(1);
    expect(short.stderr).toContain('token.txt: the token must be at least 16 characters long (it has 5)');
  }, 60_000);
});
