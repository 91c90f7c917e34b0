// `sublinear eval`: the flags become a job for evaluate() (src/job/evaluate.ts); this prints its report:
// the metrics line and how they were computed, or (--json) the report as one JSON object.
import { evaluate, type EvalJob, type EvalReport } from '../job/evaluate.js';
import { metricLine } from '../network/metrics.js';
import { calibrationLine } from '../network/calibration.js';
import { jobEvents, type Out } from './engine.js';

/** The options of `sublinear eval`: the job's, and how the result is printed. */
export type EvalCliOptions = EvalJob & {
  /** Print the report as one JSON object (the last stdout line). */
  json?: boolean;
};

export async function evalCommand(o: EvalCliOptions, io: Out): Promise<number> {
  const { json, ...job } = o;
  const { report, rank } = await evaluate({ ...job, ...jobEvents(io) });
  // Under MPI rank 0 prints.
  if (rank === 0) io.out(json ? JSON.stringify(report) + '\n' : evalText(report));
  return 0;
}

/** The text `sublinear eval` prints without --json: the metrics, then how they were computed. */
function evalText(e: EvalReport): string {
  const how = e['checkpoint'] !== undefined
    ? `${e.points} points predicted in ${e.seconds.toFixed(2)} s on ${e.ranks} rank(s), exact: every label scored on its rank`
    : `${e.points} points predicted in ${e.seconds.toFixed(2)} s, ${e.mode}: ${Math.round(e['outputsScoredPerPoint'] as number)} of ${e['outputs']} outputs scored per point` +
      `${e.mode === 'sampled' ? `, index built in ${(e['indexSeconds'] as number).toFixed(2)} s` : ''}`;
  return `${metricLine(e.metrics, e.ks)}\n(${how})\n${e.calibration ? `${calibrationLine(e.calibration)}\n` : ''}`;
}
