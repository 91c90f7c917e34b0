// The --config file of `sublinear train`: one JSON object holding the network (NetworkConfig's keys)
// and, next to it, training options (the subset of Network.fit's options that makes sense in a file).
// Without "layers" the network is the default one for the data (a file of training options only).
// One strict schema: every key is known or refused with its path and a did-you-mean, so a typo like
// `layers[0].activaton` is an error instead of a ReLU network trained silently. Flags given on the
// command line override the file's training options.
//
//   { "layers": [{ "size": 512, "dropout": 0.5 }, { "size": 3993 }], "seed": 3,
//     "epochs": 20, "lr": 0.002, "batchSize": 256, "validation": { "patience": 5 } }
import { readFile } from 'node:fs/promises';
import { defaultConfig, NETWORK_KEYS, resolveConfig, type DataShapeForDefaults, type NetworkConfig } from '../network/config.js';
import { resolveValidation } from '../train/early-stop.js';
import { INPUT_SCALINGS } from '../network/input-scale.js';
import type { FitOptions } from '../train/fit.js';
import { RebuildSchedule } from '../network/schedule.js';
import { fsErrorReason } from '../util/fs-errors.js';
import { checkKnownKeys } from '../util/suggest.js';

/** Training options a --config file may hold: these of Network.fit's options (documented there); flags override them. */
export type ConfigFileTraining = Pick<FitOptions, 'epochs' | 'batchSize' | 'lr' | 'beta1' | 'beta2' | 'eps' | 'workers' | 'threads' | 'validation' | 'rebuild' | 'inputScaling'>;

export const TRAINING_FILE_KEYS = ['epochs', 'batchSize', 'lr', 'beta1', 'beta2', 'eps', 'workers', 'threads', 'validation', 'rebuild', 'inputScaling'] as const satisfies readonly (keyof ConfigFileTraining)[];

/** The most epochs `train` accepts (--epochs and a config's "epochs"): beyond, a typo, not a plan. */
export const MAX_EPOCHS = 1_000_000;

/**
 * A parsed --config file: the network without inputDim when the file leaves it to the data, and without
 * layers when the file holds only training options (and perhaps a seed): the default network for the data.
 */
export interface ConfigFile {
  network: Omit<NetworkConfig, 'inputDim' | 'layers'> & { inputDim?: number; layers?: NetworkConfig['layers'] };
  training: ConfigFileTraining;
}

/**
 * The network of a --config file for data of this shape: the file's layers (inputDim from the data unless
 * the file gives it), or for a file without layers the default network for the data (defaultConfig).
 * `seed` (--seed) overrides the file's.
 */
export function networkOfFile(file: ConfigFile, shape: DataShapeForDefaults, seed?: number): NetworkConfig {
  const n = file.network;
  if (!n.layers) return defaultConfig(shape, seed ?? n.seed ?? 1);
  return { ...n, layers: n.layers, inputDim: n.inputDim ?? shape.features, seed: seed ?? n.seed };
}

/**
 * Reads and validates a --config file before any data is read. Every problem is an Error whose message
 * starts with the path. The network's inputDim, when absent, is validated later against the data.
 */
export async function readConfigFile(path: string): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new Error(`${path}: cannot read the configuration file: ${fsErrorReason(e)}`);
  }
  let parsed: unknown;
  try {
    // A byte order mark (Windows editors write one) is not part of the JSON; data files skip it too.
    parsed = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (e) {
    throw new Error(`${path}: not valid JSON: ${(e as Error).message}`);
  }
  return parseConfigObject(parsed, path);
}

/** Validates the parsed JSON of a --config file (`path` names it in messages). */
export function parseConfigObject(parsed: unknown, path: string): ConfigFile {
  const fail = (m: string) => new Error(`${path}: ${m}`);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw fail('expected a JSON object with "layers" (and optionally training options)');
  const o = parsed as Record<string, unknown>;
  checkKnownKeys(o, [...NETWORK_KEYS, ...TRAINING_FILE_KEYS], '', fail);
  const network: Record<string, unknown> = {};
  const training: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) ((TRAINING_FILE_KEYS as readonly string[]).includes(k) ? training : network)[k] = v;
  // Only training options (and perhaps a seed): the default network for the data, checked with it later.
  if (network.layers === undefined) {
    if (network.inputDim !== undefined) throw fail('"inputDim" without "layers": give the layers too, or leave both out for the default network of the data');
  } else {
    try {
      // inputDim 1 stands in for one the data will give: everything else is checked now.
      resolveConfig({ ...(network as unknown as NetworkConfig), inputDim: (network.inputDim as number | undefined) ?? 1 });
    } catch (e) {
      throw fail((e as Error).message);
    }
  }
  const t = training as ConfigFileTraining;
  const int = (v: unknown, name: string, min: number, max = Number.MAX_SAFE_INTEGER) => {
    if (v !== undefined && !(typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max)) {
      throw fail(`Expected integer in [${min}, ${max}] for ${name} but received ${JSON.stringify(v)}`);
    }
  };
  const num = (v: unknown, name: string, ok: (x: number) => boolean, range: string) => {
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && ok(v))) throw fail(`Expected number in ${range} for ${name} but received ${JSON.stringify(v)}`);
  };
  int(t.epochs, 'epochs', 1, MAX_EPOCHS);
  int(t.batchSize, 'batchSize', 1);
  int(t.workers, 'workers', 0, 256);
  int(t.threads, 'threads', 1, 256);
  num(t.lr, 'lr', (x) => x > 0, '(0, inf)');
  num(t.beta1, 'beta1', (x) => x >= 0 && x < 1, '[0, 1)');
  num(t.beta2, 'beta2', (x) => x >= 0 && x < 1, '[0, 1)');
  num(t.eps, 'eps', (x) => x > 0, '(0, inf)');
  if (t.inputScaling !== undefined && !INPUT_SCALINGS.includes(t.inputScaling)) {
    throw fail(`Expected 'auto', 'maxabs', 'log' or 'off' for inputScaling but received ${JSON.stringify(t.inputScaling)}`);
  }
  try {
    if (t.validation !== undefined && t.validation !== false) resolveValidation(t.validation);
    if (t.rebuild !== undefined) new RebuildSchedule(t.rebuild);
  } catch (e) {
    throw fail((e as Error).message);
  }
  return { network: network as ConfigFile['network'], training: t };
}
