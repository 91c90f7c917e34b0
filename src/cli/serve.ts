// `sublinear serve`: parses flags, loads the model, runs the library's prediction server (src/serve/)
// until SIGINT or SIGTERM, then stops it gracefully (the requests already received are answered).
import { parseSize } from '../util/parse-values.js';
import { Network } from '../network/network.js';
import { serve } from '../serve/server.js';
import { defineCommand, UsageError, type CliIO } from './args.js';
import { checkInputFile } from '../job/preflight.js';
import { GracefulStop } from './signals.js';
import { denseSampledWarning } from '../job/data-checks.js';

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
  summary: 'Serve a model\'s predictions over HTTP/JSON (POST /predict, GET /health, GET /model).',
  description:
    'POST /predict takes {"features": {"<feature id>": value, ...}}, {"text": "..."} (models trained on text) or ' +
    '{"instances": [...]} of either, with optional "k" and "mode" ("exact" or "sampled"), and answers ' +
    '{"labels": [...], "scores": [...]} (plus "names" when the model has label names), or {"predictions": [...]} ' +
    'for a batch. Errors are {"error": "..."} with status 400 (bad request), 413 (too large), 429 (queue full: ' +
    'retry later) or 503 (stopping). Concurrent requests are batched into the native predict calls, which run on ' +
    '--workers threads. SIGINT or SIGTERM stops accepting requests, answers those already received, and exits 0. ' +
    'The first line on stdout is the address it listens on.',
  flags: {
    model: { type: 'string', required: true, valueName: 'model', description: 'model file written by train --save' },
    port: { type: 'integer', min: 0, max: 65535, default: 8080, valueName: 'port', description: 'TCP port (0: any free port)' },
    host: { type: 'string', default: '127.0.0.1', valueName: 'address', description: 'address to listen on (0.0.0.0: every interface)' },
    workers: { type: 'integer', min: 0, max: 256, valueName: 'n', description: 'prediction threads; 0 predicts in the server\'s thread (default: number of cores)' },
    mode: { type: 'choice', choices: ['exact', 'sampled'] as const, default: 'exact', description: 'mode of requests that give none' },
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
    'serve --model model.sl --mode sampled --workers 2 --host 0.0.0.0',
  ],
  run: (o, io) => serveCommand(o, io),
});

async function serveCommand(
  o: {
    model: string; port?: number; host?: string; workers?: number; mode?: 'exact' | 'sampled'; k?: number; maxK?: number; candidates?: number;
    maxBatch?: number; maxQueue?: number; maxInstances?: number; maxBody?: string; maxMemory?: string; quiet?: boolean;
  },
  io: CliIO,
): Promise<number> {
  const maxBodyBytes = bytes('--max-body', o.maxBody);
  const maxMemory = bytes('--max-memory', o.maxMemory);
  if (o.k !== undefined && o.maxK !== undefined && o.k > o.maxK) throw new UsageError(`option --k ${o.k} exceeds --max-k ${o.maxK}`);
  if ((o.maxInstances ?? 1024) > (o.maxQueue ?? 4096)) throw new UsageError(`option --max-instances ${o.maxInstances ?? 1024} exceeds --max-queue ${o.maxQueue ?? 4096}`);
  await checkInputFile(o.model, '--model');
  const net = await Network.load(o.model, { maxMemory, workers: o.workers });
  const labels = net.config.layers.at(-1)!.size;
  // Said once here: the server does not warn per request (ServeOptions.mode).
  const dense = o.mode === 'sampled' && !o.quiet ? denseSampledWarning(net.config, o.model) : null;
  if (dense) io.err(`sublinear: warning: ${dense}\n`);
  const server = await serve(net, {
    port: o.port, host: o.host, workers: o.workers, mode: o.mode, k: Math.min(o.k ?? 5, labels), maxK: o.maxK, candidates: o.candidates,
    maxBatch: o.maxBatch, maxQueue: o.maxQueue, maxInstances: o.maxInstances, maxBodyBytes,
    onError: (m) => io.err(`sublinear serve: ${m}\n`),
  });
  const stop = new GracefulStop((sig) => {
    if (!o.quiet) io.err(`sublinear serve: ${sig}: answering the requests received, then stopping\n`);
  }).install();
  io.out(`listening on ${server.url}\n`);
  if (!o.quiet) io.err(`sublinear serve: ${o.model}: ${net.config.inputDim} features, ${labels} labels; POST ${server.url}/predict\n`);
  await new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve(), { once: true }));
  await server.close();
  stop.uninstall();
  if (!o.quiet) io.err('sublinear serve: stopped\n');
  return 0;
}
