// Fixture of test/train/distributed.test.ts, run under `mpirun -np 2`: rank 1 fails after a collective
// while rank 0 waits in the next one. argv[2] 'throw': rank 1's body throws (runAsRank must end the job
// naming the rank); 'kill': rank 1 dies with SIGKILL (mpirun must end the job). Uses the compiled dist/.
import { runAsRank } from '../../dist/src/train/distributed.js';

const how = process.argv[2];
const io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };
const code = await runAsRank(io, async (dist) => {
  dist.comm.barrier();
  if (dist.rank === 1) {
    if (how === 'kill') process.kill(process.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    throw new Error('injected failure on this rank');
  }
  dist.comm.barrier(); // rank 0 waits here for a peer that never comes
  return 0;
});
process.exit(code);
