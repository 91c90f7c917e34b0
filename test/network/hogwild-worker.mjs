// Worker of the HOGWILD smoke test: trains the shared network (SharedArrayBuffer weights) on its own
// batches with the raw addon, concurrently with another worker, without locks.
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

const require = createRequire(import.meta.url);
const addon = require('../../build/Release/sublinear.node');
const { net, data, batches, epochs, seed } = workerData;
const stats = new Float64Array(4);
let samples = 0;
for (let e = 0; e < epochs; e++) {
  batches.forEach((pointIds, b) => {
    addon.netTrainSlice(
      net,
      data,
      pointIds,
      { mode: 0, lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / pointIds.length, seed: (seed + e * 1000 + b) >>> 0 },
      stats,
    );
    samples += stats[1];
  });
}
parentPort.postMessage({ samples });
