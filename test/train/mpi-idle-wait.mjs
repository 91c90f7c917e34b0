// Fixture of test/train/distributed.test.ts, run under `mpirun -np 2`: rank 0 works alone for a while (here it
// sleeps 1.5 s) before it hands a text to the others (DistributedRun.agree), while rank 1 waits for it. Each
// rank prints one JSON line: its rank, the text it got, and the wall and CPU milliseconds of its agree call.
// argv[2] 'bad': rank 0 calls idleBarrier with an invalid sleep, which must throw (not abort), then agrees.
// Uses the compiled dist/.
import { runAsRank } from '../../dist/src/train/distributed.js';

const io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };
const code = await runAsRank(io, async (dist) => {
  let error = '';
  if (process.argv[2] === 'bad' && dist.rank === 0) {
    try {
      dist.comm.idleBarrier(0);
    } catch (e) {
      error = e.message;
    }
  }
  if (dist.rank === 0) await new Promise((r) => setTimeout(r, 1500));
  const t0 = performance.now(), c0 = process.cpuUsage();
  const got = dist.agree(dist.rank === 0 ? 'chosen by rank 0' : '');
  const c = process.cpuUsage(c0);
  process.stdout.write(`${JSON.stringify({ rank: dist.rank, got, wallMs: performance.now() - t0, cpuMs: (c.user + c.system) / 1000, error })}\n`);
  return 0;
});
process.exit(code);
