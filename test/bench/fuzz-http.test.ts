// The prediction server's request fuzzer (bench/fuzz-http.ts): a bounded run against a real in-process
// server holds the contract (every malformed request gets a 4xx with a message, nothing hangs), every kind
// of case is generated, cases are a function of (seed, index), the checker catches a server that breaks
// the contract (5xx, a connection closed without an answer), and the runner's command exits 0 with a JSON
// report (1 on a failure).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caseProblem, httpCase, HTTP_CASE_KINDS, runHttpFuzz } from '../../bench/fuzz-http.js';
import { synthesize } from '../../src/datasets/synth.js';
import { Network } from '../../src/network/network.js';
import { fit } from '../../src/train/fit-network.js';
import { serve, type PredictionServer } from '../../src/serve/server.js';

let server: PredictionServer;
const target = { valid: JSON.stringify({ instances: [{ features: { 0: 0.5, 1999: 1 } }, { features: { 1: 1 } }], k: 3 }), maxBodyBytes: 16 * 1024 };
beforeAll(async () => {
  const data = synthesize({ shape: 'tiny', points: 300, seed: 3 });
  const net = new Network({ inputDim: data.features, seed: 1, layers: [{ size: 8 }, { size: data.labels }] });
  await fit(net, data, { epochs: 1, workers: 0 });
  server = await serve(net, { port: 0, workers: 1, maxBodyBytes: target.maxBodyBytes });
});
afterAll(async () => {
  await server?.close();
});

describe('fuzz-http', () => {
  it('600 cases (seed 20261127) against the server: all answered 4xx (or 200 for a GET or a valid body), none fails', async () => {
    const r = await runHttpFuzz(server.url, target, { requests: 600, seed: 20261127, connections: 6 });
    expect(r.failures).toEqual([]);
    for (const k of HTTP_CASE_KINDS) expect(Object.values(r.statuses[k]).reduce((a, b) => a + b, 0), k).toBeGreaterThan(20);
    expect(r.statuses.oversize).toEqual({ 413: expect.any(Number) });
    expect(r.statuses.raw['400']).toBeGreaterThan(20);
    expect(r.statuses.raw['431']).toBeGreaterThan(0);
  }, 120_000);

  it('derives each case from (seed, index) alone', () => {
    const a = httpCase(5, 17, target), b = httpCase(5, 17, target), c = httpCase(6, 17, target);
    expect(a).toEqual(b);
    expect(JSON.stringify(a)).not.toBe(JSON.stringify(c));
  });

  it('reports a server that answers 500 or closes the connection without an answer', async () => {
    let n = 0;
    const bad = createServer((req, res) => {
      req.resume();
      if (n++ % 2 === 0) res.socket?.destroy();
      else res.writeHead(500).end('{"error":"boom"}');
    });
    await new Promise<void>((r) => bad.listen(0, '127.0.0.1', r));
    const port = (bad.address() as { port: number }).port;
    try {
      const r = await runHttpFuzz(`http://127.0.0.1:${port}`, target, { requests: 40, seed: 1, connections: 2 });
      const problems = r.failures.map((f) => f.problem);
      expect(problems.some((p) => p.startsWith('status 500'))).toBe(true);
      expect(problems.some((p) => p.startsWith('no answer'))).toBe(true);
    } finally {
      bad.closeAllConnections();
      await new Promise((r) => bad.close(r));
    }
    expect(caseProblem({ kind: 'body', method: 'POST', path: '/predict' }, { status: 400, body: 'not json' })).toBe('status 400 with a body that is not JSON: not json');
    expect(caseProblem({ kind: 'path', method: 'GET', path: '/x' }, { status: 404, body: '{"error":"no route"}' })).toBeNull();
    expect(caseProblem({ kind: 'path', method: 'GET', path: '/x' }, { status: 200, body: '{}' })).toBe('status 200 for a path case: {}');
  }, 60_000);

  it('node dist/bench/fuzz-http.js serves a model with the real command and prints the report', () => {
    const cli = join(import.meta.dirname, '../../dist/bench/fuzz-http.js');
    if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npx tsc -p .; npm test does it)`);
    const r = spawnSync(process.execPath, [cli, '--requests', '300', '--seed', '4', '--json'], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { requests: number; seed: number; failures: unknown[]; servesAfter: boolean; problems: string[] };
    expect(report).toMatchObject({ requests: 300, seed: 4, failures: [], servesAfter: true, problems: [] });
  }, 120_000);
});
