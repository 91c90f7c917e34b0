// The prediction server: HTTP/JSON on Node's own `http` (no framework: the limits that matter here, body
// size, queue and shutdown, are easier to state exactly without one). Predictions run on a pool of worker
// threads that share the model's SharedArrayBuffers; concurrent requests are batched into the native
// predict calls by src/serve/batcher.ts. Routes, API and limits: docs/serving.md.
//
// The model served can change while the server runs: a reload (reload(), POST /admin/reload, SIGHUP in the
// CLI) swaps in a new model file, and online learning (POST /learn, src/network/online.ts) updates the live
// one and grows it when labels are added. Both go through one writer (a queue: a reload waits for a learn
// call, and the reverse); readers never wait for the writer. Every request is answered by the model it was
// parsed for (a `Served` snapshot: a batch holds requests of one model only), so a swap never hands a
// request to a model whose inputs it was not checked against.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { basename, extname } from 'node:path';
import { sharedFloat32, sharedUint32, type SparseDataset } from '../datasets/csr.js';
import { defaultCandidates, Network, type LoadOptions, type PredictMode } from '../network/network.js';
import { explainLabels } from '../network/explain.js';
import type { LearnReport, OnlineOptions } from '../network/online.js';
import { LearnerThread } from './learner-thread.js';
import { featureTokens } from '../text/feature-names.js';
import { createExecutor, type Executor } from '../network/executor.js';
import { packageVersion } from '../util/package-root.js';
import { authorized, checkToken, exposureProblem } from './auth.js';
import { MicroBatcher, type BatcherStats, type PointPrediction } from './batcher.js';
import { PROMETHEUS_CONTENT_TYPE, ServerMetrics } from './metrics.js';
import { PAGE_HTML } from './page.js';
import { parseLearnRequest, parsePredictRequest, RequestError, type ParsedLearn, type ParsedRequest, type RequestLimits, type TextFeaturizer } from './request.js';
import { inferResponse, modelMetadata, parseInferRequest, type PointAnswer } from './v2.js';

/** Options of `serve`. */
export interface ServeOptions {
  /** TCP port; 0 picks a free one (see `PredictionServer.port`). Default 8080. */
  port?: number;
  /**
   * Address to listen on. Default '127.0.0.1' (this machine only). Another address ('0.0.0.0', '::', a
   * network interface's) needs `token`, or `insecure`.
   */
  host?: string;
  /** Worker threads running the predictions; 0 runs them in the server's own thread. Default: the machine's cores. */
  workers?: number;
  /** Labels returned per point when a request gives no `k`. Default 5 (at most the model's labels). */
  k?: number;
  /** Largest `k` a request may ask for. Default 100. */
  maxK?: number;
  /**
   * Mode of requests that give none: 'exact', 'sampled' or 'auto' (see PredictOptions.mode: 'sampled' for a
   * sampled output layer with a wide part, as the library and the CLI predict by default; on a model whose
   * output layer is dense, 'sampled' scores every output, as 'exact' does, without a warning per request).
   * Default 'auto'.
   */
  mode?: PredictMode;
  /** 'sampled' mode: output neurons scored per point (PredictOptions.candidates). Default: 0.5% of the labels, at least 256. */
  candidates?: number;
  /** Points per native predict call: waiting requests are batched up to this many. Default 128. */
  maxBatch?: number;
  /** Points waiting for a worker; a request that would exceed it is answered 429. Default 4096. */
  maxQueue?: number;
  /** Largest request body in bytes (413 above). Default 1 MiB. */
  maxBodyBytes?: number;
  /** Most instances in one `{"instances": [...]}` request (413 above; at most maxQueue). Default 1024. */
  maxInstances?: number;
  /** A request must arrive completely within this many milliseconds (408 after). Default 30000. */
  requestTimeoutMs?: number;
  /**
   * `close()` answers the requests already received, then waits at most this long for their responses to
   * be sent before it drops the remaining connections. Default 30000.
   */
  stopTimeoutMs?: number;
  /** Receives one line per unexpected server-side failure (500). Default: stderr. */
  onError?: (message: string) => void;
  /**
   * A bearer token (at least 16 printable characters) that every request must carry (`Authorization:
   * Bearer <token>`), except GET /v2/health/live and the page at / (which holds no data and asks for it):
   * 401 otherwise. Default none: no authentication (then the server listens on loopback only, unless `insecure`).
   */
  token?: string;
  /** Listen on an address beyond loopback without a token (behind a proxy that authenticates, say). Default false. */
  insecure?: boolean;
  /**
   * POST /learn (src/network/online.ts): true, or the learner's options. Default false: /learn answers 403
   * (learning changes the model that every client gets).
   */
  learn?: boolean | OnlineOptions;
  /**
   * Where POST /snapshot (and `snapshotEveryMs`) write the live model (atomically). Default: the model file
   * when the server loaded one (a reload then reads what was learned); none when it was given a Network.
   */
  snapshot?: string;
  /** Also write a snapshot this often (milliseconds) when examples were learned since the last one. Default none. */
  snapshotEveryMs?: number;
  /** The model's name in the Open Inference Protocol routes (/v2/models/<name>). Default: the model file's name without its extension, else 'model'. */
  modelName?: string;
  /**
   * The model file that reload() (POST /admin/reload; SIGHUP in the CLI) reads. Default: the file `model`
   * names; none when it is a Network (then reload() fails).
   */
  modelFile?: string;
  /** Limits of the model files that a reload reads (LoadOptions). Default: those of Network.load. */
  load?: LoadOptions;
}

/** What `GET /model` answers. */
export interface ModelInfo {
  /** The model's name (the Open Inference Protocol's), and its file when the server loaded one. */
  name: string;
  file?: string;
  /** Feature ids accepted: 0 .. inputDim - 1. */
  inputDim: number;
  /** Number of labels (output neurons). */
  labels: number;
  layers: { size: number; activation: string; sampled: boolean }[];
  /** Whether `{"text": ...}` is accepted (the model has a text vectorizer). */
  text: boolean;
  /** Whether answers carry label names. */
  labelNames: boolean;
  /** A calibrated model: its default threshold and shortlist (answers carry `probabilities`). */
  calibration?: { threshold: number; shortlist: number };
  /** Whether POST /learn is on. */
  learn: boolean;
  defaults: { k: number; mode: 'exact' | 'sampled'; candidates: number };
  limits: { maxK: number; maxBatch: number; maxQueue: number; maxBodyBytes: number; maxInstances: number };
  workers: number;
}

/** One model as the server answers with it: the network and what follows from it. */
interface Served {
  net: Network;
  limits: RequestLimits;
  info: ModelInfo;
  candidates: number;
}

const positiveInt = (name: string, v: number | undefined, dflt: number, min = 1): number => {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < min) throw new Error(`Expected ${min === 0 ? 'non-negative' : 'positive'} integer for ${name} but received ${JSON.stringify(v)}`);
  return v;
};

/** PredictionServer's constructor's parameters (see there). */
type ConstructorArgs = [
  http: Server, exec: Executor, batcher: MicroBatcher, stopTimeoutMs: number, served: Served, make: (net: Network) => Served,
  warm: (net: Network) => Promise<void>, learner: LearnerThread | null, learnOptions: OnlineOptions | null, metrics: ServerMetrics,
  files: { model?: string; snapshot?: string; load: LoadOptions },
];

/** Calls PredictionServer's private constructor (set by its static block). */
let construct: (...args: ConstructorArgs) => PredictionServer;

/** One caller at a time (learn, reload, snapshot): each waits for the ones before it. */
class Writer {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(f: () => Promise<T>): Promise<T> {
    const next = this.tail.then(f, f);
    this.tail = next.catch(() => {});
    return next;
  }
}

/** What the explanation route says the contributions are. */
const DECOMPOSITION = 'exact gradient x input of the ReLU/linear network (plus the biases\' share), the wide part\'s and the re-ranker\'s per-feature terms; score = bias + the sum of all features\' contributions';

/**
 * A running prediction server (see `serve`).
 *
 * @example
 * ```ts
 * import { serve } from 'sublinear';
 * const server = await serve('model.sl', { port: 8080, mode: 'sampled' });
 * // POST http://127.0.0.1:8080/predict {"features": {"12": 0.5, "907": 1}, "k": 3}
 * process.on('SIGTERM', () => void server.close());
 * ```
 */
export class PredictionServer {
  /** The port it listens on (the one picked when `port` was 0). */
  readonly port: number;
  /** `http://host:port` */
  readonly url: string;
  private stopping: Promise<void> | undefined;
  private active = 0;
  private drained: (() => void) | undefined;
  private reloading = false;
  private readonly writer = new Writer();
  private snapshotTimer: NodeJS.Timeout | undefined;
  private learnedAtSnapshot = 0;

  /**
   * Private, so that the published typings show no parameter types (they would need @types/node's Server);
   * `serve` constructs through `construct`, which the static block below sets.
   */
  private constructor(
    private readonly http: Server,
    private readonly exec: Executor,
    private readonly batcher: MicroBatcher,
    private readonly stopTimeoutMs: number,
    /** The model answering now. */
    private served: Served,
    private readonly make: (net: Network) => Served,
    private readonly warm: (net: Network) => Promise<void>,
    private learner: LearnerThread | null,
    private readonly learnOptions: OnlineOptions | null,
    readonly metrics: ServerMetrics,
    private readonly files: { model?: string; snapshot?: string; load: LoadOptions },
  ) {
    const a = http.address() as AddressInfo;
    this.port = a.port;
    this.url = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  static {
    construct = (...args) => new PredictionServer(...args);
  }

  /** The network answering now (a reload or a growth by online learning replaces it). */
  get network(): Network {
    return this.served.net;
  }

  /** @internal */
  get current(): Served {
    return this.served;
  }

  /** Requests being handled, and the batcher's counters. */
  stats(): BatcherStats & { requests: number } {
    return { ...this.batcher.stats(), requests: this.active };
  }

  /** Whether the model and the worker threads are ready and no reload runs (GET /v2/health/ready). */
  get ready(): boolean {
    return !this.reloading && !this.isStopping;
  }

  /** @internal called by the request handler */
  enter(): void {
    this.active++;
  }
  /** @internal */
  leave(): void {
    if (--this.active === 0 && this.drained) this.drained();
  }
  get isStopping(): boolean {
    return this.stopping !== undefined;
  }

  /** @internal */
  startSnapshots(everyMs: number): void {
    this.snapshotTimer = setInterval(() => {
      const learned = this.metrics.learned.get();
      if (learned === this.learnedAtSnapshot || this.isStopping) return;
      this.snapshot().catch((e: unknown) => this.onSnapshotError(e));
    }, everyMs);
    this.snapshotTimer.unref();
  }
  /** @internal */
  onSnapshotError: (e: unknown) => void = () => {};

  /**
   * Reads the model file again and swaps it in: requests keep being answered by the model they arrived for,
   * the next ones by the new one; GET /v2/health/ready says false meanwhile. Waits for a learn call or a
   * snapshot in progress. What was learned online and not snapshotted is lost (the learner starts anew on
   * the new model). On failure (a damaged or missing file) the old model stays. Resolves with the new
   * model's labels and the seconds the reload took.
   */
  reload(): Promise<{ labels: number; seconds: number }> {
    return this.writer.run(async () => {
      const file = this.files.model;
      if (!file) throw new Error('no model file to reload: the server was started with a Network, not a file');
      const t0 = performance.now();
      this.reloading = true;
      try {
        const net = await Network.load(file, this.files.load);
        const next = this.make(net);
        await this.warm(net);
        const learner = this.learnOptions ? await LearnerThread.start(net, this.learnOptions) : null;
        this.served = next;
        const old = this.learner;
        this.learner = learner;
        await old?.close();
        this.metrics.reloads.inc({ result: 'ok' });
        return { labels: next.info.labels, seconds: (performance.now() - t0) / 1000 };
      } catch (e) {
        this.metrics.reloads.inc({ result: 'error' });
        throw e;
      } finally {
        this.reloading = false;
      }
    });
  }

  /**
   * Learns labelled examples (the body of POST /learn, parsed): label names not seen before and label ids
   * past the last add labels; the update is visible to the next prediction when this resolves. One at a
   * time (the writer). Throws RequestError(403) when learning is off.
   */
  learn(parsed: ParsedLearn): Promise<LearnReport> {
    return this.writer.run(async () => {
      const learner = this.learner;
      if (!learner) throw new RequestError(403, 'learning is off: start the server with --learn (ServeOptions.learn) to accept POST /learn');
      const net = this.served.net;
      const names = net.labelNames ? [...net.labelNames] : undefined;
      const ids = names ? new Map(names.map((n, i) => [n, i])) : undefined;
      let outputs = net.config.layers.at(-1)!.size;
      const labelLists = parsed.labels.map((ls) => {
        const out = new Set<number>();
        for (const l of ls) {
          if (typeof l === 'number') {
            if (names && l >= names.length) throw new RequestError(400, `label id ${l} is past the model's ${names.length} labels: name a new label instead`);
            out.add(l);
            outputs = Math.max(outputs, l + 1);
          } else {
            let id = ids!.get(l);
            if (id === undefined) {
              id = names!.length;
              names!.push(l);
              ids!.set(l, id);
              outputs = id + 1;
            }
            out.add(id);
          }
        }
        return [...out].sort((a, b) => a - b);
      });
      let lnnz = 0;
      for (const ls of labelLists) lnnz += ls.length;
      const labelOffsets = sharedUint32(parsed.points + 1), labelIndices = sharedUint32(lnnz);
      let p = 0;
      labelLists.forEach((ls, i) => {
        for (const l of ls) labelIndices[p++] = l;
        labelOffsets[i + 1] = p;
      });
      const data: SparseDataset = {
        points: parsed.points, features: net.inputFeatures, labels: outputs,
        offsets: toSharedU32(parsed.offsets), indices: toSharedU32(parsed.indices), values: toSharedF32(parsed.values), labelOffsets, labelIndices,
      };
      let changes;
      try {
        changes = await learner.learn(data, names);
      } catch (e) {
        // The learner's refusals (examples that do not fit) are the client's; a thread that stopped is ours.
        if (learner.stoppedReason) throw new RequestError(500, `online learning is unavailable: ${learner.stoppedReason.message}`);
        throw new RequestError(400, (e as Error).message);
      }
      const { report } = changes;
      // The served network mirrors what the learner's thread did to its own copy: the arrays are shared
      // (the rows moved in place); the objects it replaced, and its counters, are taken or redone here.
      if (changes.grown) {
        this.served = this.make(net.adoptOutputLayer(changes.grown.layer, names, changes.grown.indexFresh));
      } else {
        if (changes.wide) net.spec.layers.at(-1)!.wide = changes.wide;
        if (names) net.labelNames = names;
      }
      const live = this.served.net;
      for (const l of labelIndices) if (live.labelFreq && l < live.labelFreq.length) live.labelFreq[l]!++;
      live.trainPoints += parsed.points;
      this.metrics.learned.inc({}, report.examples);
      if (report.newLabels) this.metrics.newLabels.inc({}, report.newLabels);
      return report;
    });
  }

  /** Writes the live model to the snapshot file (atomically), after any learn call in progress. Resolves with the file and seconds. */
  snapshot(): Promise<{ file: string; seconds: number }> {
    return this.writer.run(async () => {
      const file = this.files.snapshot;
      if (!file) throw new RequestError(409, 'no snapshot file: the server was started with a Network (give ServeOptions.snapshot)');
      const t0 = performance.now();
      const learned = this.metrics.learned.get();
      try {
        await this.served.net.save(file);
      } catch (e) {
        this.metrics.snapshots.inc({ result: 'error' });
        throw e;
      }
      this.learnedAtSnapshot = learned;
      this.metrics.snapshots.inc({ result: 'ok' });
      return { file, seconds: (performance.now() - t0) / 1000 };
    });
  }

  /**
   * Stops: no new connections; requests already received are answered (new ones on open connections get
   * 503), then connections are closed and the worker threads end. Idempotent.
   */
  close(): Promise<void> {
    this.stopping ??= (async () => {
      clearInterval(this.snapshotTimer);
      const closed = new Promise<void>((r) => this.http.close(() => r()));
      this.http.closeIdleConnections();
      const allAnswered = this.active === 0 ? Promise.resolve() : new Promise<void>((r) => (this.drained = r));
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((r) => (timer = setTimeout(r, this.stopTimeoutMs)));
      await Promise.race([allAnswered.then(() => this.batcher.idle()), late]);
      clearTimeout(timer);
      this.http.closeAllConnections();
      await closed;
      // A learn call or snapshot in progress finishes before the threads go.
      await this.writer.run(async () => {});
      await this.learner?.close();
      await this.exec.close();
    })();
    return this.stopping;
  }
}

const toSharedU32 = (a: Uint32Array) => {
  const s = sharedUint32(a.length);
  s.set(a);
  return s;
};
const toSharedF32 = (a: Float32Array) => {
  const s = sharedFloat32(a.length);
  s.set(a);
  return s;
};

/**
 * Starts an HTTP/JSON prediction server for a model (a `Network` or a model file) and resolves once it
 * listens. Routes (docs/serving.md): `POST /predict` (`{"features": {"id": value, ...}}`, `{"text": "..."}`
 * for a model trained on text, or `{"instances": [...]}` of either; optional `k`, `mode`, `threshold`),
 * `POST /explain`, `POST /learn`, `POST /snapshot`, `POST /admin/reload`, `GET /model`, `GET /health`,
 * `GET /metrics` (Prometheus), the Open Inference Protocol's `/v2/...` routes, and the page at `/`.
 * Errors are `{"error": message}` with a 4xx status.
 *
 * @example
 * ```ts
 * import { serve } from 'sublinear';
 * const server = await serve('model.sl', { port: 8080, workers: 2, learn: true });
 * // curl -s localhost:8080/predict -d '{"features": {"12": 0.5}, "k": 3, "threshold": "model"}'
 * await server.close();
 * ```
 */
export async function serve(model: Network | string, opts: ServeOptions = {}): Promise<PredictionServer> {
  const port = positiveInt('port', opts.port, 8080, 0);
  if (port > 65535) throw new Error(`Expected a port from 0 to 65535 but received ${port}`);
  const workers = positiveInt('workers', opts.workers, availableParallelism(), 0);
  const maxK = positiveInt('maxK', opts.maxK, 100);
  const k = positiveInt('k', opts.k, 5);
  const maxBatch = positiveInt('maxBatch', opts.maxBatch, 128);
  const maxQueue = positiveInt('maxQueue', opts.maxQueue, 4096);
  const maxBodyBytes = positiveInt('maxBodyBytes', opts.maxBodyBytes, 1 << 20);
  const maxInstances = positiveInt('maxInstances', opts.maxInstances, Math.min(1024, maxQueue));
  if (maxInstances > maxQueue) throw new Error(`Expected maxInstances (${maxInstances}) to be at most maxQueue (${maxQueue})`);
  const requestTimeoutMs = positiveInt('requestTimeoutMs', opts.requestTimeoutMs, 30_000);
  const stopTimeoutMs = positiveInt('stopTimeoutMs', opts.stopTimeoutMs, 30_000, 0);
  const snapshotEveryMs = opts.snapshotEveryMs === undefined ? undefined : positiveInt('snapshotEveryMs', opts.snapshotEveryMs, 0);
  const mode = opts.mode ?? 'auto';
  if (mode !== 'exact' && mode !== 'sampled' && mode !== 'auto') throw new Error(`Expected 'exact', 'sampled' or 'auto' for mode but received ${JSON.stringify(opts.mode)}`);
  if (k > maxK) throw new Error(`Expected k (${k}) to be at most maxK (${maxK})`);
  const host = opts.host ?? '127.0.0.1';
  const token = opts.token === undefined ? undefined : checkToken(opts.token, 'ServeOptions.token');
  const exposure = exposureProblem(host, token, opts.insecure ?? false);
  if (exposure) throw new Error(exposure);
  const onError = opts.onError ?? ((m: string) => void process.stderr.write(`sublinear serve: ${m}\n`));

  const file = typeof model === 'string' ? model : opts.modelFile;
  const net0 = typeof model === 'string' ? await Network.load(model, opts.load) : model;
  const name = opts.modelName ?? (file ? basename(file, extname(file)) : 'model');
  if (!/^[A-Za-z0-9_.-]{1,100}$/.test(name)) throw new Error(`Expected a model name of 1 to 100 letters, digits, '_', '.' or '-' but received ${JSON.stringify(name)}`);
  const learnOptions = opts.learn === undefined || opts.learn === false ? null : opts.learn === true ? {} : opts.learn;
  const make = (net: Network): Served => {
    const outputs = net.config.layers.at(-1)!.size;
    const candidates = positiveInt('candidates', opts.candidates, defaultCandidates(outputs));
    const vectorizer: TextFeaturizer | undefined = net.textVectorizer;
    if (vectorizer && vectorizer.features > net.inputFeatures) {
      throw new Error(`The model's text vectorizer makes ${vectorizer.features} features but its inputDim is ${net.inputFeatures}`);
    }
    const cal = net.calibration;
    const limits: RequestLimits = {
      features: net.inputFeatures, labels: outputs, maxK, maxInstances, defaultK: Math.min(k, outputs),
      defaultMode: net.inferenceMode(mode), autoMode: net.inferenceMode('auto'), text: vectorizer,
      threshold: cal?.threshold, shortlist: cal?.shortlist ?? 10,
    };
    const info: ModelInfo = {
      name, ...(file !== undefined ? { file } : {}),
      inputDim: net.inputFeatures,
      labels: outputs,
      layers: net.config.layers.map((l) => ({ size: l.size, activation: l.activation, sampled: l.sampling !== undefined })),
      text: vectorizer !== undefined,
      labelNames: net.labelNames !== undefined,
      ...(cal ? { calibration: { threshold: cal.threshold, shortlist: cal.shortlist } } : {}),
      learn: learnOptions !== null,
      defaults: { k: limits.defaultK, mode: limits.defaultMode, candidates },
      limits: { maxK, maxBatch, maxQueue, maxBodyBytes, maxInstances },
      workers,
    };
    return { net, limits, info, candidates };
  };
  let served = make(net0);
  let learner0: LearnerThread | null = null;

  const exec = createExecutor(workers);
  let server: PredictionServer | undefined;
  try {
    // No warning per request (mode 'sampled' on a dense output layer scores every output: ServeOptions.mode).
    const batcher = new MicroBatcher(() => served.net.inputFeatures, (data, kk, m, which) => {
      const s = which as Served;
      return s.net.predict({ ...data, features: s.net.inputFeatures }, { k: kk, mode: m, candidates: s.candidates, chunk: maxBatch, executor: exec, onWarning: () => {} });
    }, { maxBatch, maxQueue, concurrency: Math.max(1, workers) });
    // Warm-up: the first sampled prediction builds the hash tables and the cluster index; do it now, once,
    // rather than in (and concurrently across) the first requests.
    const warm = async (net: Network) => {
      const one = { points: 1, features: net.inputFeatures, labels: 0, offsets: new Uint32Array(2), indices: new Uint32Array(0), values: new Float32Array(0), labelOffsets: new Uint32Array(2), labelIndices: new Uint32Array(0) };
      const candidates = positiveInt('candidates', opts.candidates, defaultCandidates(net.config.layers.at(-1)!.size));
      await net.predict(one, { k: 1, mode: 'sampled', candidates, executor: exec, onWarning: () => {} });
      await net.predict(one, { k: 1, mode: 'exact', executor: exec });
    };
    await warm(net0);
    // After the warm-up: the learner's thread takes the cluster index it built.
    if (learnOptions) learner0 = await LearnerThread.start(net0, learnOptions);
    const startSeconds = Date.now() / 1000;
    const metrics = new ServerMetrics({
      queued: () => batcher.stats().queued, inFlight: () => batcher.stats().inFlight, ready: () => server?.ready ?? false,
      labels: () => server?.current.info.labels ?? served.info.labels, startSeconds,
    });
    batcher.onBatch = (points) => {
      metrics.batchPoints.observe(points);
      metrics.predicted.inc({}, points);
    };

    const http = createServer({ requestTimeout: requestTimeoutMs, headersTimeout: Math.min(requestTimeoutMs, 10_000), keepAliveTimeout: 5_000 });
    http.on('request', (req: IncomingMessage, res: ServerResponse) => {
      void handle(req, res).catch((e) => {
        onError(`internal error: ${(e as Error)?.stack ?? String(e)}`);
        if (!res.headersSent) send(res, 500, { error: 'internal server error' });
        else res.destroy();
      });
    });
    // A malformed request line or headers: Node answers 400 and closes; never an exception here.
    http.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      if (socket.writable && err.code !== 'ECONNRESET') {
        const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request';
        socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      } else {
        socket.destroy();
      }
    });
    await new Promise<void>((resolve, reject) => {
      http.once('error', reject);
      http.listen(port, host, () => {
        http.off('error', reject);
        resolve();
      });
    });
    const snapshotFile = opts.snapshot ?? file;
    server = construct(http, exec, batcher, stopTimeoutMs, served, make, warm, learner0, learnOptions, metrics, {
      ...(file !== undefined ? { model: file } : {}), ...(snapshotFile !== undefined ? { snapshot: snapshotFile } : {}), load: opts.load ?? {},
    });
    const srv = server;
    if (snapshotEveryMs !== undefined) {
      srv.onSnapshotError = (e) => onError(`snapshot failed: ${(e as Error).message}`);
      srv.startSnapshots(snapshotEveryMs);
    }

    /** A parsed request's predictions, selected as it asked (top-k, or by threshold), with names. */
    const answer = async (parsed: Omit<ParsedRequest, 'batch'>, s: Served): Promise<PointAnswer[]> => {
      const cal = s.net.calibration;
      const fetch = parsed.threshold !== undefined ? Math.min(Math.max(parsed.k, s.limits.shortlist), s.limits.labels) : parsed.k;
      const preds = await batcher.submit({ ...parsed, fetch, model: s });
      const names = s.net.labelNames;
      return preds.map((p) => {
        const sel = parsed.threshold !== undefined ? byThreshold(p, parsed.k, cal!.shortlist, parsed.threshold) : p;
        return { ...sel, ...(names ? { names: sel.labels.map((l) => names[l] ?? null) } : {}) };
      });
    };

    const route = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<string> => {
      const s = srv.current;
      const get = req.method === 'GET' || req.method === 'HEAD';
      // Liveness: the process answers. No token, no body beyond the protocol's.
      if (path === '/v2/health/live') {
        if (!get) return methodNotAllowed(res, 'GET, HEAD');
        send(res, 200, { live: true });
        return path;
      }
      if (path === '/' && get) {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(PAGE_HTML), 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : PAGE_HTML);
        return path;
      }
      if (token !== undefined && !authorized(req.headers.authorization, token)) {
        res.setHeader('WWW-Authenticate', 'Bearer realm="sublinear"');
        throw new RequestError(401, 'a bearer token is required: send "Authorization: Bearer <token>"');
      }
      switch (path) {
        case '/health':
          if (!get) return methodNotAllowed(res, 'GET, HEAD');
          send(res, srv.isStopping ? 503 : 200, { status: srv.isStopping ? 'stopping' : 'ok', ready: srv.ready, ...srv.stats() });
          return path;
        case '/model':
          if (!get) return methodNotAllowed(res, 'GET, HEAD');
          send(res, 200, s.info);
          return path;
        case '/metrics': {
          if (!get) return methodNotAllowed(res, 'GET, HEAD');
          const text = metrics.registry.render();
          res.writeHead(200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(text) });
          res.end(req.method === 'HEAD' ? undefined : text);
          return path;
        }
        case '/v2/health/ready':
          if (!get) return methodNotAllowed(res, 'GET, HEAD');
          // The protocol: 200 is true, a 4xx false (a readiness probe takes any 4xx as not ready).
          send(res, srv.ready ? 200 : 400, { ready: srv.ready });
          return path;
        case '/v2':
          if (!get) return methodNotAllowed(res, 'GET, HEAD');
          send(res, 200, { name: 'sublinear', version: packageVersion(), extensions: ['sublinear_probabilities', 'sublinear_explain', 'sublinear_learn'] });
          return path;
        case '/predict':
        case '/explain': {
          if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
          const body = await readBody(req, maxBodyBytes);
          if (srv.isStopping) throw new RequestError(503, 'the server is stopping');
          const explain = path === '/explain';
          const parsed = parsePredictRequest(body, s.limits, explain);
          const answers = await answer(parsed, s);
          const out = explain ? answers.map((a, i) => explainAnswer(s.net, parsed, i, a)) : answers;
          send(res, 200, parsed.batch ? { predictions: out } : out[0]!);
          return path;
        }
        case '/learn': {
          if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
          if (!learnOptions) throw new RequestError(403, 'learning is off: start the server with --learn (ServeOptions.learn) to accept POST /learn');
          const body = await readBody(req, maxBodyBytes);
          if (srv.isStopping) throw new RequestError(503, 'the server is stopping');
          const net = s.net;
          const parsed = parseLearnRequest(body, s.limits, { names: net.labelNames !== undefined, maxLabel: net.config.layers.at(-1)!.size + 100_000 });
          const r = await srv.learn(parsed);
          send(res, 200, { learned: r.examples, newLabels: r.newLabels, labels: r.labels, seconds: r.seconds });
          return path;
        }
        case '/snapshot': {
          if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
          await drain(req);
          const r = await srv.snapshot();
          send(res, 200, r);
          return path;
        }
        case '/admin/reload': {
          if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
          await drain(req);
          try {
            const r = await srv.reload();
            send(res, 200, { reloaded: true, ...r });
          } catch (e) {
            throw new RequestError(500, `reload failed, still serving the previous model: ${(e as Error).message}`);
          }
          return path;
        }
      }
      const v2 = /^\/v2\/models\/([^/]+)(\/versions\/([^/]+))?(\/ready|\/infer)?$/.exec(path);
      if (v2) {
        const [, which, , version, tail] = v2;
        if (decodeURIComponent(which!) !== name) throw new RequestError(404, `no model ${JSON.stringify(decodeURIComponent(which!).slice(0, 100))}: this server serves ${JSON.stringify(name)}`);
        if (version !== undefined) throw new RequestError(404, `model ${JSON.stringify(name)} has no versions: leave /versions/${decodeURIComponent(version).slice(0, 40)} out of the path`);
        if (tail === '/ready') {
          if (!get) return methodNotAllowed(res, 'GET, HEAD');
          send(res, srv.ready ? 200 : 400, { name, ready: srv.ready });
          return '/v2/models/ready';
        }
        if (tail === undefined) {
          if (!get) return methodNotAllowed(res, 'GET, HEAD');
          send(res, 200, modelMetadata(name, {
            features: s.info.inputDim, labels: s.info.labels, text: s.info.text, names: s.info.labelNames,
            calibrated: s.net.calibration !== null, ...(s.net.calibration ? { threshold: s.net.calibration.threshold } : {}),
          }));
          return '/v2/models/metadata';
        }
        if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
        const body = await readBody(req, maxBodyBytes);
        if (srv.isStopping) throw new RequestError(503, 'the server is stopping');
        const p = parseInferRequest(body, s.limits, (texts) => s.net.textVectorizer!.transform(texts));
        const answers = await answer(p.request, s);
        send(res, 200, inferResponse(name, p.id, answers, p.request.k, p.outputs, { probabilities: s.net.calibration !== null, names: s.net.labelNames !== undefined }));
        return '/v2/models/infer';
      }
      throw new RequestError(404, `no route ${JSON.stringify(path.slice(0, 100))}: see GET / and docs/serving.md (POST /predict, /explain, /learn, GET /model, /metrics, /v2/...)`);
    };

    async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
      srv.enter();
      const t0 = performance.now();
      const path = (req.url ?? '/').split('?')[0]!;
      let label = KNOWN_ROUTES.has(path) ? path : 'other';
      try {
        if (srv.isStopping) res.setHeader('Connection', 'close');
        label = await route(req, res, path);
      } catch (e) {
        if (!(e instanceof RequestError)) throw e;
        if (e.status === 413 || e.status === 408) res.setHeader('Connection', 'close');
        if (e.status === 429) res.setHeader('Retry-After', '1');
        send(res, e.status, { error: e.message });
      } finally {
        metrics.requests.inc({ route: label, code: String(res.statusCode) });
        metrics.latency.observe((performance.now() - t0) / 1000, { route: label });
        srv.leave();
      }
    }
  } catch (e) {
    if (!server) {
      await learner0?.close();
      await exec.close();
    }
    throw e;
  }
  return server;
}

/** Routes counted under their own path in the metrics (others: 'other', or the /v2/models family). */
const KNOWN_ROUTES = new Set(['/', '/health', '/model', '/metrics', '/predict', '/explain', '/learn', '/snapshot', '/admin/reload', '/v2', '/v2/health/live', '/v2/health/ready']);

/** Of a point's candidates, the first `shortlist`'s whose probability reaches `t`, by probability, at most k. */
function byThreshold(p: PointPrediction, k: number, shortlist: number, t: number): PointPrediction {
  const probs = p.probabilities!;
  const idx = [];
  for (let r = 0; r < Math.min(shortlist, p.labels.length); r++) if (probs[r]! >= t) idx.push(r);
  idx.sort((a, b) => probs[b]! - probs[a]! || a - b);
  const keep = idx.slice(0, k);
  return { labels: keep.map((r) => p.labels[r]!), scores: keep.map((r) => p.scores[r]!), probabilities: keep.map((r) => probs[r]!) };
}

/** The answer of POST /explain for point i: its labels, and each one's score split over the point's features. */
function explainAnswer(net: Network, parsed: Omit<ParsedRequest, 'batch'>, i: number, a: PointAnswer): Record<string, unknown> {
  const lo = parsed.offsets[i]!, hi = parsed.offsets[i + 1]!;
  const ex = explainLabels(net, { indices: parsed.indices.subarray(lo, hi), values: parsed.values.subarray(lo, hi) }, a.labels, parsed.top ?? 10);
  const v = net.textVectorizer, text = parsed.texts?.[i];
  const r6 = (x: number) => Number(x.toPrecision(6));
  return {
    ...a,
    decomposition: DECOMPOSITION,
    explanations: ex.map((e) => {
      const tokens = v && text != null ? featureTokens(v, e.features.map((c) => c.feature), text) : undefined;
      return {
        label: e.label, ...(a.names ? { name: net.labelNames?.[e.label] ?? null } : {}), score: r6(e.score), bias: r6(e.bias), rest: r6(e.rest),
        features: e.features.map((c, t) => ({ feature: c.feature, ...(tokens ? { token: tokens[t] } : {}), contribution: r6(c.contribution), network: r6(c.network), wide: r6(c.wide), rerank: r6(c.rerank) })),
      };
    }),
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function methodNotAllowed(res: ServerResponse, allow: string): string {
  res.setHeader('Allow', allow);
  send(res, 405, { error: `method not allowed: use ${allow.replace(', ', ' or ')}` });
  return 'other';
}

/** Reads and discards a body that the route ignores (at most 64 KiB). */
async function drain(req: IncomingMessage): Promise<void> {
  await readBody(req, 64 * 1024);
}

/** The body as UTF-8 text, at most `max` bytes (RequestError 413 above; 400 when invalid UTF-8 or cut off). */
function readBody(req: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (declared > max) {
      req.resume(); // discard what the client sends; the response closes the connection
      reject(new RequestError(413, `request body too large: ${declared} bytes (this server accepts at most ${max})`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (c: Buffer) => {
      if (failed) return;
      size += c.length;
      if (size > max) {
        failed = true;
        chunks.length = 0;
        reject(new RequestError(413, `request body too large: more than ${max} bytes (this server accepts at most ${max})`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (failed) return;
      try {
        resolve(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks, size)));
      } catch {
        reject(new RequestError(400, 'the request body is not valid UTF-8'));
      }
    });
    req.on('error', (e) => {
      if (!failed) reject(new RequestError(400, `the request body could not be read: ${e.message}`));
      failed = true;
    });
    req.on('close', () => {
      if (!failed && !req.complete) reject(new RequestError(400, 'the request was aborted by the client'));
      failed = true;
    });
  });
}
