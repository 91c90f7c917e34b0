// Fixture of test/train/distributed.test.ts, run under `mpirun -np 2`: both ranks build the same network,
// rank 1 then changes one weight and one Adam step count; the state comparison must see the difference,
// repair it from rank 0, and see identical replicas the next time. Rank 0 prints one JSON line.
import { Network } from '../../dist/src/network/network.js';
import { runAsRank } from '../../dist/src/train/distributed.js';

const io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };
const code = await runAsRank(io, async (dist, out) => {
  const net = new Network({ inputDim: 50, seed: 4, layers: [{ size: 8 }, { size: 30, sampling: { hash: 'dwta', K: 2, L: 4 } }] });
  if (dist.rank === 1) {
    net.spec.layers[1].weights[7] += 0.5;
    net.spec.layers[0].rowSteps[3] = 9;
  }
  const first = await dist.verify(net);
  const second = await dist.verify(net);
  out.out(JSON.stringify({ first, second, w: net.spec.layers[1].weights[7], steps: net.spec.layers[0].rowSteps[3], report: dist.summary(net).checksum }) + '\n');
  return 0;
});
process.exit(code);
