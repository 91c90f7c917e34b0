// `sublinear serve`: parses flags, loads the model, runs the library's prediction server (src/serve/)
// until SIGINT or SIGTERM, then stops it gracefully (the requests already received are answered). SIGHUP
// reloads the model file (PredictionServer.reload).
import { parseDuration, parseSize } from '../util/parse-values.js';
import { exposureProblem, readTokenFile } from '../serve/auth.js';
import { Network } from '../network/network.js';
import { serve } from '../serve/server.js';
import { defineCommand, UsageError, type CliIO } from './args.js';
import { checkInputFile } from '../job/preflight.js';
import { GracefulStop } from './signals.js';
import { denseSampledWarning } from '../job/data-checks.js';
import { basename, extname } from 'node:path';

function bytes(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  try {
    return parseSize(text, flag);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

export const serveCmd = defineCommand({
  name: 'serve',
  summary: 'Serve a model over HTTP: predictions with probabilities, explanations, online learning, the Open Inference Protocol, Prometheus metrics, a web page.',
  description:
    'POST /predict takes {"features": {"<feature id>": value, ...}}, {"text": "..."} (models trained on text) or ' +
    '{"instances": [...]} of either, with optional "k", "mode" ("exact", "sampled" or "auto") and "threshold" (a probability, or "model": ' +
    'the labels whose calibrated probability reaches it), and answers {"labels": [...], "scores": [...], "probabilities": [...]} ' +
    '(probabilities for a calibrated model, "names" for a model with label names), or {"predictions": [...]} for a batch. ' +
    'POST /explain answers the same with each label\'s score split over the input features (tokens). POST /learn (with --learn) ' +
    'takes {"examples": [{"features" or "text", "labels": [...]}]} and updates the live model; POST /snapshot writes it to --snapshot. ' +
    'The Open Inference Protocol (KServe V2): GET /v2/health/live, /v2/health/ready, /v2/models/<name>, POST /v2/models/<name>/infer. ' +
    'GET /metrics: Prometheus text format. GET /: a page to try the model and watch the metrics. ' +
    'Errors are {"error": "..."} with status 400 (bad request), 401 (token), 403 (learning off), 413 (too large), 429 (queue full: ' +
    'retry later) or 503 (stopping). SIGHUP or POST /admin/reload reads the model file again and swaps it in without failing a request. ' +
    'SIGINT or SIGTERM stops accepting requests, answers those already received, and exits 0. The first line on stdout is the address it listens on. ' +
    'Beyond loopback (--host 0.0.0.0) the server needs --token (or --insecure).',
  flags: {
    model: { type: 'string', required: true, valueName: 'model', description: 'model file written by train --save' },
    port: { type: 'integer', min: 0, max: 65535, default: 8080, valueName: 'port', description: 'TCP port (0: any free port)' },
    host: { type: 'string', default: '127.0.0.1', valueName: 'address', description: 'address to listen on (0.0.0.0: every interface; needs --token or --insecure)' },
    token: { type: 'string', valueName: 'file', description: 'require "Authorization: Bearer <token>" on every route but GET /v2/health/live and the page; the token is the file\'s content (at least 16 characters)' },
    insecure: { type: 'boolean', description: 'listen beyond loopback without a token' },
    learn: { type: 'boolean', description: 'accept POST /learn: labelled examples update the live model (new labels are added)' },
    snapshot: { type: 'string', valueName: 'file', description: 'where POST /snapshot writes the live model, atomically (default: the --model file)' },
    snapshotEvery: { type: 'string', valueName: 'duration', description: 'also write a snapshot this often when examples were learned since the last one, e.g. 10m' },
    name: { type: 'string', valueName: 'name', description: 'the model\'s name in /v2/models/<name> (default: the model file\'s name without its extension)' },
    workers: { type: 'integer', min: 0, max: 256, valueName: 'n', description: 'prediction threads; 0 predicts in the server\'s thread (default: number of cores)' },
    mode: {
      type: 'choice', choices: ['auto', 'exact', 'sampled'] as const, default: 'auto',
      description: 'mode of requests that give none: auto is sampled for a sampled output layer with a wide part (the defaults from 8192 labels), else exact',
    },
    k: { type: 'integer', min: 1, default: 5, valueName: 'k', description: 'labels per point for requests that give no "k"' },
    maxK: { type: 'integer', min: 1, default: 100, valueName: 'k', description: 'largest "k" a request may ask for' },
    candidates: { type: 'integer', min: 1, valueName: 'n', description: 'sampled mode: output neurons scored per point (default: 0.5% of the labels, at least 256)' },
    maxBatch: { type: 'integer', min: 1, default: 128, valueName: 'n', description: 'points per native predict call (waiting requests are batched up to this)' },
    maxQueue: { type: 'integer', min: 1, default: 4096, valueName: 'n', description: 'points waiting for a thread; more gets 429' },
    maxInstances: { type: 'integer', min: 1, default: 1024, valueName: 'n', description: 'instances per batch request (at most --max-queue)' },
    maxBody: { type: 'string', default: '1MiB', valueName: 'bytes', description: 'largest request body (413 above)' },
    maxMemory: { type: 'string', valueName: 'bytes', description: 'refuse a model needing more memory than this, e.g. 4GB (default: 90% of the machine\'s memory)' },
    quiet: { type: 'boolean', short: 'q', description: 'no messages on stderr (errors are still printed)' },
  },
  examples: [
    'serve --model model.sl --port 8080   # then: curl -s localhost:8080/predict -d \'{"features": {"12": 0.5}, "k": 3}\'',
    'serve --model model.sl --learn --snapshot-every 10m   # POST /learn updates the model; it is written back every 10 minutes',
    'serve --model model.sl --host 0.0.0.0 --token token.txt --workers 2',
  ],
  run: (o, io) => serveCommand(o, io),
});

async function serveCommand(
  o: {
    model: string; port?: number; host?: string; token?: string; insecure?: boolean; learn?: boolean; snapshot?: string; snapshotEvery?: string; name?: string;
    workers?: number; mode?: 'auto' | 'exact' | 'sampled'; k?: number; maxK?: number; candidates?: number;
    maxBatch?: number; maxQueue?: number; maxInstances?: number; maxBody?: string; maxMemory?: string; quiet?: boolean;
  },
  io: CliIO,
): Promise<number> {
  const maxBodyBytes = bytes('--max-body', o.maxBody);
  const maxMemory = bytes('--max-memory', o.maxMemory);
  if (o.k !== undefined && o.maxK !== undefined && o.k > o.maxK) throw new UsageError(`option --k ${o.k} exceeds --max-k ${o.maxK}`);
  if ((o.maxInstances ?? 1024) > (o.maxQueue ?? 4096)) throw new UsageError(`option --max-instances ${o.maxInstances ?? 1024} exceeds --max-queue ${o.maxQueue ?? 4096}`);
  let snapshotEveryMs: number | undefined;
  if (o.snapshotEvery !== undefined) {
    try {
      snapshotEveryMs = Math.round(1000 * parseDuration(o.snapshotEvery, '--snapshot-every'));
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  }
  const token = o.token !== undefined ? await readTokenFile(o.token) : undefined;
  // Refused before the model is read: a misconfiguration should not cost the load.
  const host = o.host ?? '127.0.0.1';
  const exposure = exposureProblem(host, token, o.insecure ?? false);
  if (exposure) throw new UsageError(exposure.replace('(serve --token FILE)', '(--token FILE)'));
  await checkInputFile(o.model, '--model');
  const load = { maxMemory, workers: o.workers };
  const net = await Network.load(o.model, load);
  const labels = net.config.layers.at(-1)!.size;
  // Said once here: the server does not warn per request (ServeOptions.mode).
  const dense = o.mode === 'sampled' && !o.quiet ? denseSampledWarning(net.config, o.model) : null;
  if (dense) io.err(`sublinear: warning: ${dense}\n`);
  const server = await serve(net, {
    port: o.port, host, workers: o.workers, mode: o.mode, k: Math.min(o.k ?? 5, labels), maxK: o.maxK, candidates: o.candidates,
    maxBatch: o.maxBatch, maxQueue: o.maxQueue, maxInstances: o.maxInstances, maxBodyBytes,
    ...(token !== undefined ? { token } : {}), insecure: o.insecure ?? false, learn: o.learn ?? false,
    snapshot: o.snapshot ?? o.model, ...(snapshotEveryMs !== undefined ? { snapshotEveryMs } : {}),
    modelName: o.name ?? (basename(o.model, extname(o.model)).replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 100) || 'model'),
    modelFile: o.model, load,
    onError: (m) => io.err(`sublinear serve: ${m}\n`),
  });
  const stop = new GracefulStop((sig) => {
    if (!o.quiet) io.err(`sublinear serve: ${sig}: answering the requests received, then stopping\n`);
  }).install();
  const hup = () => {
    if (!o.quiet) io.err(`sublinear serve: SIGHUP: reloading ${o.model}\n`);
    server.reload().then(
      (r) => void (!o.quiet && io.err(`sublinear serve: reloaded ${o.model}: ${r.labels} labels (${r.seconds.toFixed(2)} s)\n`)),
      (e: unknown) => io.err(`sublinear serve: reload failed, still serving the previous model: ${(e as Error).message}\n`),
    );
  };
  process.on('SIGHUP', hup);
  io.out(`listening on ${server.url}\n`);
  if (!o.quiet) {
    const cal = net.calibration ? `, calibrated probabilities (threshold ${net.calibration.threshold.toFixed(3)})` : '';
    io.err(`sublinear serve: ${o.model}: ${net.inputFeatures} features, ${labels} labels${cal}${o.learn ? ', learning on' : ''}; POST ${server.url}/predict, page ${server.url}/\n`);
  }
  await new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve(), { once: true }));
  await server.close();
  process.off('SIGHUP', hup);
  stop.uninstall();
  if (!o.quiet) io.err('sublinear serve: stopped\n');
  return 0;
}
