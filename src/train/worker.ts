// A piscina worker: loads the addon in its own thread and runs the same kernels as the serial engine
// on the shared memory it receives (HOGWILD: no locks around weight updates).
import { runPredict, runRehash, runRendezvous, runTrain, runTrainSparse } from './kernels.js';

export const train = runTrain;
export const trainSparse = runTrainSparse;
export const predict = runPredict;
export const rehash = runRehash;
export const rendezvous = runRendezvous;
