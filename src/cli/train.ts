// `sublinear train`: the flags (declared in engine-commands.ts) become a job for train() (src/job/train.ts),
// which does the work; this prints what it reports: progress and messages on stderr, the test metrics or
// the JSON report (--json) on stdout.
import type { ProgressSink } from '../job/events.js';
import { train, type TrainJob } from '../job/train.js';
import { forcedStopText } from '../job/train-stop.js';
import { metricLine } from '../network/metrics.js';
import { calibrationLine, type CalibrationMetrics } from '../network/calibration.js';
import { jobEvents, type Out } from './engine.js';
import { exitCodeOf, GracefulStop } from './signals.js';

/** The options of `sublinear train`: the job's, and how the result is printed. */
export type TrainCliOptions = TrainJob & {
  /** Print the report as one JSON object (the last stdout line). */
  json?: boolean;
};

export async function trainCommand(o: TrainCliOptions, io: Out): Promise<number> {
  // Ctrl-C and SIGTERM stop training after the batches in flight (the job says so and still saves). Under
  // MPI a signal ends the job (mpirun forwards it to every rank, and one rank stopping alone would leave the
  // others waiting in a collective): the periodic checkpoints are what a job resumes from. The handlers stay
  // installed until the end: a signal during the save or the final evaluation still ends the run with
  // 130/143 once they are done (a second one exits at once).
  // Label-sharded ranks (--distributed) stop together: a signal on any rank reaches the others through the next
  // step's exchange, every rank writes its slice of the checkpoint, and every rank exits with the signal's code.
  // (Open MPI's mpirun does not forward SIGINT or SIGTERM: it forwards SIGUSR1 and SIGUSR2, taken here as
  // SIGINT and SIGTERM.) Data-parallel ranks keep the old rule: a signal ends the job.
  const events = jobEvents(io);
  /** The display in use (cleared before the second signal's line) and the model file once it is written. */
  let bar: ProgressSink | undefined;
  let savedTo: string | undefined;
  const stop = new GracefulStop(() => {}, (sig) => {
    bar?.clear();
    io.err(`${forcedStopText(sig, o, savedTo)}\n`);
  });
  if (!o.distributed) stop.install();
  else if (!o.dataParallel) stop.install(true);
  try {
    const { json, ...job } = o;
    const { report, rank, notSaved, savedInstead } = await train({
      ...job, ...events, progress: (label, unit) => (bar = events.progress(label, unit)), signal: stop.signal, onSaved: (file) => (savedTo = file),
    });
    // Under MPI rank 0 prints. The result goes to stdout whatever --quiet says (it silences stderr); --json
    // prints it in its object. (Label-sharded runs say the test metrics on stderr, with their progress.)
    if (rank === 0 && report.metrics && !json && report.mode !== 'sharded') io.out(`test: ${metricLine(report.metrics)}\n`);
    const testCalibration = report['testCalibration'] as CalibrationMetrics | undefined;
    if (rank === 0 && testCalibration && !json) io.out(`test ${calibrationLine(testCalibration)}\n`);
    if (rank === 0 && json) io.out(JSON.stringify(report) + '\n');
    if (notSaved) {
      io.err(`sublinear: ${notSaved}\n`);
      return 1;
    }
    // Under MPI the stop is the job's, agreed by the ranks (report.signal), whichever rank got the signal. A
    // model saved elsewhere than --save (said by the job): the command did not do what it was asked.
    const agreed = o.distributed && typeof report['signal'] === 'string' ? exitCodeOf(report['signal']) : undefined;
    return agreed ?? stop.exitCode(savedInstead ? 1 : 0);
  } finally {
    stop.uninstall();
  }
}
