// `train --distributed` across two hosts: two network namespaces on this machine, linked by a veth pair, each
// with an address of its own (inside the namespaces only), mpirun started in the first and reaching the second
// through an rsh agent that enters its namespace (as ssh would reach another machine), the ranks talking over
// TCP. A 2-host run equals the same job on one host; a rank killed on the second host ends the job naming it;
// --resume from the last periodic checkpoint, again across both hosts, ends where the uninterrupted run ends.
// Skipped, saying why, without root, iproute2's `ip netns`, Open MPI or the MPI addon (.ci/run installs them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from '../cli/built.js';
import { MPI_ENV, mpiSkipReason } from './mpi-env.js';

// Names unique to this test process (another test run may hold namespaces at the same time).
const tag = `sl${process.pid % 100000}`;
const HOSTS = [
  { ns: `${tag}a`, veth: `${tag}a0`, addr: '10.77.0.1' },
  { ns: `${tag}b`, veth: `${tag}b0`, addr: '10.77.0.2' },
] as const;

const ip = (...a: string[]) => spawnSync('ip', a, { encoding: 'utf8' });

function skipReason(): string | null {
  if (process.platform !== 'linux') return 'network namespaces are Linux only';
  if (process.getuid?.() !== 0) return 'making network namespaces needs root';
  if (ip('-V').status !== 0) return 'iproute2 (ip) not found (apt-get install iproute2)';
  const mpi = mpiSkipReason();
  if (mpi) return mpi;
  const probe = `${tag}p`;
  const made = ip('netns', 'add', probe);
  if (made.status !== 0) return `ip netns add failed: ${made.stderr.trim()}`;
  ip('netns', 'del', probe);
  return null;
}
const reason = skipReason();

const ENV = MPI_ENV;
type Run = { code: number | null; stdout: string; stderr: string };
const lastJson = (s: string) => JSON.parse(s.trim().split('\n').at(-1)!);

let dir: string;
let agent: string;
let data: string[];

/** mpirun (in the first host's namespace) of `args` on both hosts, one rank each, over TCP between their addresses. */
function acrossArgv(...args: string[]): string[] {
  return [
    'netns', 'exec', HOSTS[0].ns, 'mpirun', '-np', '2', '--host', HOSTS.map((h) => `${h.addr}:1`).join(','),
    '--mca', 'plm_rsh_agent', agent, '--mca', 'btl', 'tcp,self', '--mca', 'btl_tcp_if_include', '10.77.0.0/24', '--mca', 'oob_tcp_if_include', '10.77.0.0/24',
    process.execPath, CLI, ...args,
  ];
}
function across(...args: string[]): Run {
  const r = spawnSync('ip', acrossArgv(...args), { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
function local(np: number, ...args: string[]): Run {
  const r = spawnSync('mpirun', ['-np', String(np), process.execPath, CLI, ...args], { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(async () => {
  if (reason) return;
  assertBuilt(['src/cli', 'src/train', 'src/network']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-hosts-'));
  // Two hosts: a namespace each, a veth pair between them, an address on each end, loopback up.
  for (const h of HOSTS) expect(ip('netns', 'add', h.ns).status).toBe(0);
  expect(ip('link', 'add', HOSTS[0].veth, 'type', 'veth', 'peer', 'name', HOSTS[1].veth).status).toBe(0);
  for (const h of HOSTS) {
    for (const a of [['link', 'set', h.veth, 'netns', h.ns], ['-n', h.ns, 'addr', 'add', `${h.addr}/24`, 'dev', h.veth], ['-n', h.ns, 'link', 'set', h.veth, 'up'], ['-n', h.ns, 'link', 'set', 'lo', 'up']]) {
      const r = ip(...a);
      expect(r.status, r.stderr).toBe(0);
    }
  }
  // The rsh agent: mpirun calls it as `agent <host> <command...>` (as it would call ssh); it runs the command
  // in the namespace that holds the host's address.
  agent = join(dir, 'agent.sh');
  writeFileSync(agent, [
    '#!/bin/sh', 'host="$1"; shift', 'case "$host" in',
    ...HOSTS.map((h) => `  ${h.addr}) ns=${h.ns} ;;`),
    '  *) echo "agent: unknown host $host" >&2; exit 1 ;;', 'esac', 'exec ip netns exec "$ns" /bin/sh -c "$*"', '',
  ].join('\n'));
  chmodSync(agent, 0o755);
  const synth = spawnSync(process.execPath, [CLI, 'data', 'synth', '--shape', 'tiny', '--train', '2400', '--test', '400', '--seed', '5', '--out', dir], { encoding: 'utf8' });
  expect(synth.status, synth.stderr).toBe(0);
  data = ['--train', join(dir, 'train.txt'), '--test', join(dir, 'test.txt'), '--seed', '3'];
}, 60_000);

afterAll(async () => {
  if (reason) return;
  for (const h of HOSTS) ip('netns', 'del', h.ns); // the veth pair goes with them
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(reason !== null)(`train --distributed on two hosts (network namespaces, TCP)${reason ? ` (skipped: ${reason})` : ''}`, () => {
  it('trains what one host trains; a rank killed on the second host ends the job naming it; resume across both hosts ends where the uninterrupted run ends', async () => {
    const one = local(2, 'train', ...data, '--distributed', '--json');
    expect(one.code, one.stderr).toBe(0);
    const want = lastJson(one.stdout);
    const two = across('train', ...data, '--distributed', '--json');
    expect(two.code, two.stderr).toBe(0);
    const got = lastJson(two.stdout);
    expect(got.ranks).toBe(2);
    expect(got.mode).toBe('sharded');
    for (const k of ['epochs', 'bestEpoch', 'batchesDone']) expect(got[k], k).toBe(want[k]);
    expect(got.rerank.weight).toBe(want.rerank.weight);
    for (const k of ['p1', 'p3', 'p5']) expect(got.metrics[k], k).toBeCloseTo(want.metrics[k], 6);

    // Kill the rank on the second host (SIGKILL: no checkpoint of its own) after its third epoch.
    const ck = join(dir, 'ck');
    const child = spawn('ip', acrossArgv('train', ...data, '--distributed', '--json', '--checkpoint', ck, '--checkpoint-every', '25'), { cwd: ROOT, env: ENV });
    let stderr = '', killed = 0;
    child.stdout.resume();
    const code = await new Promise<number | null>((done) => {
      child.stderr.on('data', (b: Buffer) => {
        stderr += b.toString();
        if (!killed && /epoch 3: held-out/.test(stderr)) {
          // The rank is the process of the second namespace running the CLI.
          const pids = ip('netns', 'pids', HOSTS[1].ns).stdout.trim().split(/\s+/).map(Number);
          const rank = pids.find((p) => {
            try {
              return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(CLI);
            } catch {
              return false;
            }
          });
          if (rank) {
            killed = rank;
            process.kill(rank, 'SIGKILL');
          }
        }
      });
      child.on('exit', (x) => done(x));
    });
    expect(killed, stderr).toBeGreaterThan(0);
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/rank 1 .*exited on signal 9/);
    const res = across('train', '--resume', ck, '--distributed', '--json');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain('written by 2 rank(s), now 2');
    const j = lastJson(res.stdout);
    expect(j.resumedAt).toBeGreaterThan(0);
    for (const k of ['epochs', 'bestEpoch', 'batchesDone']) expect(j[k], k).toBe(want[k]);
    expect(j.rerank.weight).toBe(want.rerank.weight);
    for (const k of ['p1', 'p3', 'p5']) expect(j.metrics[k], k).toBeCloseTo(want.metrics[k], 6);
  }, 240_000);
});
