// A piscina worker: loads the addon in its own thread and runs the same kernels as the serial engine
// on the shared memory it receives (HOGWILD: no locks around weight updates).
import { runPredict, runRehash, runRendezvous, runTrain, runTrainGroup, runTrainSparse } from './kernels.js';
import type { PredictTask, RehashTask, TrainGroupTask, TrainTask } from './tasks.js';
import { fromWire } from './wire.js';

// Tasks arrive through toWire (src/network/wire.ts): views of 4 GiB or more are rebuilt here.
export const train = (t: TrainTask) => runTrain(fromWire(t));
export const trainGroup = (t: TrainGroupTask) => runTrainGroup(fromWire(t));
export const trainSparse = (t: TrainTask) => runTrainSparse(fromWire(t));
export const predict = (t: PredictTask) => runPredict(fromWire(t));
export const rehash = (t: RehashTask) => runRehash(fromWire(t));
export const rendezvous = runRendezvous;
