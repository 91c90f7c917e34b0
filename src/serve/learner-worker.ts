// The worker thread of a server's online learner (src/serve/learner-thread.ts): builds a Network over the
// served network's shared arrays and an OnlineLearner of it, lowers its own scheduling priority to the
// lowest (nice 19: within the process, the prediction threads and the event loop always run first), then
// learns one message at a time and answers with what the learner replaced.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { createExecutor } from '../network/executor.js';
import { Network } from '../network/network.js';
import { OnlineLearner } from '../network/online.js';
import type { LearnerInit, LearnMessage, LearnReply } from './learner-thread.js';

/** Nice 19 for this thread only (Linux: setpriority on the thread's id, read from /proc/thread-self); elsewhere nothing. */
function lowestPriority(): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isSafeInteger(tid) && tid > 0) setPriority(tid, 19);
  } catch {
    // Not Linux, or no /proc: the thread keeps the process's priority.
  }
}

const port = parentPort!;
const init = workerData as LearnerInit;
let learner: OnlineLearner;
try {
  const net = new Network(init.config, { state: init.spec });
  net.labelFreq = init.labelFreq;
  net.trainPoints = init.trainPoints;
  net.batchesDone = init.batchesDone;
  net.rebuildRound = init.rebuildRound;
  net.inputScale = init.inputScale;
  net.inputLog = init.inputLog;
  net.inputMap = init.inputMap;
  net.rerank = init.rerank;
  net.calibration = init.calibration;
  net.labelNames = init.labelNames;
  net.indexFresh = init.indexFresh;
  net.tablesFresh = init.tablesFresh;
  // On its own thread the learner needs no slices of anyone's event loop: it runs whenever a core is free.
  learner = new OnlineLearner(net, { ...init.options, share: 1 });
  lowestPriority();
  port.postMessage({ ready: true });
} catch (e) {
  port.postMessage({ ready: false, error: (e as Error).message });
  process.exit(0);
}

// The candidates' predictions run here, on this thread (not on the server's prediction threads).
const exec = createExecutor(0);
port.on('message', (m: LearnMessage) => {
  void (async () => {
    let reply: LearnReply;
    try {
      const before = learner.network;
      const wideBefore = before.spec.layers.at(-1)!.wide;
      const report = await learner.learn(m.examples, { ...(m.labelNames ? { labelNames: m.labelNames } : {}), executor: exec });
      const net = learner.network, out = net.spec.layers.at(-1)!;
      reply = {
        ok: true, id: m.id, report,
        ...(net !== before ? { grown: { layer: out, indexFresh: net.indexFresh } } : out.wide !== wideBefore && out.wide ? { wide: out.wide } : {}),
      };
    } catch (e) {
      reply = { ok: false, id: m.id, error: (e as Error).message };
    }
    port.postMessage(reply);
  })();
});
