// Command-line specs of `sublinear train | eval | predict | demo` (implementations in train.ts, eval.ts,
// predict.ts and demo.ts).
import { parseBytes } from '../network/memory-plan.js';
import { defineCommand, UsageError } from './args.js';
import { MAX_EPOCHS } from '../job/config-file.js';
import { parseThreshold } from '../job/eval-predict-options.js';
import { demoCommand } from './demo.js';
import { evalCommand } from './eval.js';
import { predictCommand } from './predict.js';
import { trainCommand } from './train.js';

/** A size flag (--max-memory) in bytes; a malformed one is a usage error. */
function bytesFlag(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  try {
    return parseBytes(text);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

const format = { type: 'choice', choices: ['xc', 'libsvm'] as const, default: 'xc', description: 'input format of the data files' } as const;
const zeroBased = { type: 'boolean', description: 'libsvm only: feature ids in the files start at 0 (LIBSVM files are 1-based by default)' } as const;
const workers = {
  type: 'integer', min: 0, max: 256, valueName: 'n',
  description: 'worker threads (HOGWILD); 0 runs in the main thread (default: number of cores; training a dense output layer: 1)',
} as const;
const candidates = {
  type: 'integer', min: 1, valueName: 'n',
  description: 'sampled inference: output neurons scored per point (default: 0.5% of the labels, at least 256)',
} as const;
const json = { type: 'boolean', description: 'print the result as one JSON object (the last stdout line); progress still goes to stderr (--quiet silences it)' } as const;
const quiet = { type: 'boolean', short: 'q', description: 'no progress or messages on stderr (errors, and warnings that the result is lost or not what was asked, are still printed)' } as const;
const maxMemory = { type: 'string', valueName: 'bytes', description: 'refuse work needing more memory than this, e.g. 4GB (default: 90% of the machine\'s memory)' } as const;
const mode = {
  type: 'choice', choices: ['auto', 'exact', 'sampled'] as const, default: 'auto',
  description: 'inference: exact scores every label; sampled scores only the candidates of the output layer\'s cluster index and wide part (faster); auto is sampled for a sampled output layer with a wide part (the defaults from 8192 labels), else exact',
} as const;
const propensityA = { type: 'number', above: 0, valueName: 'A', description: 'propensity model A for PSP@k, > 0 (default 0.55; 0.6 for Amazon)' } as const;
const propensityB = { type: 'number', above: 0, valueName: 'B', description: 'propensity model B for PSP@k, > 0 (default 1.5; 2.6 for Amazon)' } as const;

// train's own variants without flag defaults (--resume must tell a flag given again from a default).
const trainFormat = {
  type: 'choice', choices: ['xc', 'libsvm', 'text'] as const,
  description: 'input format of the data files: xc, libsvm, or text (one point per line: label,label<TAB>text, or fastText __label__ prefixes) (default: xc)',
} as const;
const trainMode = {
  type: 'choice', choices: ['auto', 'exact', 'sampled'] as const,
  description: 'inference on --test: exact scores every label; sampled scores only the candidates of the output layer\'s cluster index and wide part (faster); auto is sampled for a sampled output layer with a wide part (the defaults from 8192 labels), else exact (default: auto)',
} as const;

export const trainCmd = defineCommand({
  name: 'train',
  summary: 'Train a network on an extreme-classification dataset (and evaluate it on a test set).',
  description:
    'Without --config the network is chosen from the data by the defaults rule (docs/defaults.md): one ReLU ' +
    'hidden layer with dropout (1024 or 512 units where a dense output layer is cheap, else 256, or 128 for the largest ' +
    'shapes), and a softmax output, LSH-sampled with the logQ correction and a per-label wide part when there are 8192 ' +
    'labels or more, and per-label classifiers that re-rank its top candidates. Without --epochs, 5% of the training points ' +
    '(at most 5000) are held out; the learning rate stays constant while P@k on them improves, then falls to 0 over one ' +
    'more epoch (at least 64 batches), and the best epoch\'s weights are kept; under 2,000 points the epochs are chosen by ' +
    'cross-validation instead. Ctrl-C or SIGTERM stops after the batches in flight ' +
    '(and saves with --save, and writes a checkpoint with --checkpoint), then exits 130 or 143. With --checkpoint, the full training ' +
    'state is written every --checkpoint-every (atomically; the newest two files are kept); --resume continues ' +
    'such a run exactly where its last checkpoint left it, with the data paths and settings it recorded ' +
    '(flags given again override them; the files it writes must be named again, or confirmed with --use-recorded-outputs; ' +
    '--epochs can extend a run that finished its epochs, not one that held-out validation stopped). ' +
    'Output files (--save, --log) must be regular files or not exist yet: a symbolic link is followed to the regular ' +
    'file it points to (which is replaced; the link stays); a directory, device, FIFO or socket is refused before any data is read.',
  flags: {
    train: { type: 'string', valueName: 'file', description: 'training data (required unless --resume); with --distributed, %r in the name is the rank: each rank reads its own shard' },
    test: { type: 'string', valueName: 'file', description: 'test data, evaluated after training (and every --eval-every epochs)' },
    config: { type: 'string', valueName: 'json', description: 'JSON file: the network (NetworkConfig; inputDim defaults to the data; without layers, the default network) and training options (epochs, batchSize, lr, ...; flags override them)' },
    format: trainFormat,
    inputFormat: { ...trainFormat, description: 'the same as --format' },
    minDf: { type: 'integer', min: 1, valueName: 'n', description: 'text: keep words found in at least n training points (default: 2)' },
    bigrams: { type: 'boolean', description: 'text: also use pairs of neighbouring words as features' },
    maxVocabulary: { type: 'integer', min: 1, max: 0xffffffff, valueName: 'n', description: 'text: above n kept words, hash them into 2^hash-bits features (default: 200000)' },
    hashBits: { type: 'integer', min: 1, max: 26, valueName: 'b', description: 'text: hashed feature space of 2^b features, above --max-vocabulary (default: 18)' },
    init: {
      type: 'string', valueName: 'model',
      description: 'warm start: continue training this saved model on --train; labels it has never seen (names, or ids past its last) get new outputs, old ones keep their weights',
    },
    zeroBased,
    // No flag defaults for what --resume restores: a default would be indistinguishable from a flag given again.
    epochs: {
      type: 'integer', min: 1, max: MAX_EPOCHS, valueName: 'n',
      description: 'train exactly n passes over all of the training data (default: decided by held-out P@k, at most 50)',
    },
    batch: { type: 'integer', min: 1, valueName: 'n', description: 'mini-batch size (default: 128)' },
    lr: { type: 'number', above: 0, valueName: 'x', description: 'Adam learning rate, > 0 (default: 0.002 with a dense output layer, 0.01 with a sampled one; twice that, at most, where the data updates a dense network\'s first-layer rows in under a quarter of the batches or k-fold selection\'s folds hold fewer than 4 batches)' },
    workers,
    threads: {
      type: 'integer', min: 1, max: 256, valueName: 'n',
      description: 'threads sharing each mini-batch\'s dense work inside the kernels (a dense output layer, the first layer), without races (default: the cores when one worker trains a dense output layer, else 1)',
    },
    seed: { type: 'integer', min: 0, valueName: 'n', description: 'seed of every random choice (default: the config seed, else 1)' },
    save: { type: 'string', valueName: 'model', description: 'write the trained model here (atomically; a regular file or a new name, see above); without it (or --checkpoint) the model is not kept' },
    evalEvery: { type: 'integer', min: 1, valueName: 'n', description: 'evaluate on --test every n epochs' },
    maxMemory,
    log: { type: 'string', valueName: 'file', description: 'write one JSON line per epoch (loss, samples/s, held-out and test metrics) and a summary line to this file (a resumed run rewrites it with the records up to its checkpoint, then continues it); if it cannot be written, training goes on' },
    checkpoint: { type: 'string', valueName: 'dir', description: 'write training checkpoints to this directory (default with --resume: the resumed one)' },
    checkpointEvery: {
      type: 'string', valueName: 'n|Ns|Nm',
      description: 'checkpoint every n batches, or every N seconds/minutes/hours, e.g. 500, 90s, 10m, 1h (default: 10m)',
    },
    resume: {
      type: 'string', valueName: 'dir',
      description: 'continue the run checkpointed in this directory, reading the data files it records (shown first); ' +
        'the files it writes must be given again (--save, --log) unless --use-recorded-outputs',
    },
    useRecordedOutputs: {
      type: 'boolean',
      description: 'with --resume: write the --save and --log files the checkpoint records (shown first) when they are not given again',
    },
    mode: trainMode,
    candidates,
    propensityA,
    propensityB,
    json,
    quiet,
    distributed: {
      type: 'boolean',
      description: 'train as one rank of an MPI job: mpirun -np 4 sublinear train ... --distributed trains what one process trains (the same ' +
        'network, held-out selection, blend and re-ranker; label-sharded: each rank holds 1/R of the output labels and input features); rank 0 prints, ' +
        'checkpoints resume under any number of ranks, --save writes an ordinary model file; needs Open MPI, see docs/distributed.md',
    },
    dataParallel: {
      type: 'boolean',
      description: 'with --distributed: data-parallel instead (every rank holds the whole network and takes 1/R of each batch; --batch is the global batch); ' +
        'no wide part above 8,192 labels',
    },
    shardLabels: {
      type: 'boolean',
      description: 'with --distributed: label-sharded (the default; kept for older scripts)',
    },
  },
  examples: [
    'train --train train.txt --test test.txt',
    'train --train train.txt --test test.txt --eval-every 1 --log history.jsonl --save model.sl',
    'train --train train.txt --test test.txt --epochs 10 --lr 0.001 --workers 2 --save model.sl --json',
    'train --train train.txt --save model.sl --checkpoint ckpt --checkpoint-every 10m',
    'train --train docs.txt --test docs-test.txt --input-format text --save model.sl',
    'train --init model.sl --train more-docs.txt --input-format text --epochs 3 --save model2.sl',
    'train --resume ckpt --save model.sl',
    'train --resume ckpt --use-recorded-outputs',
    'train --resume ckpt --epochs 20 --save model.sl',
    'train --train train.txt --test test.txt --distributed --save model.sl --checkpoint ckpt   (under mpirun -np 4)',
    'train --resume ckpt --distributed --save model.sl   (under mpirun -np 2: any number of ranks)',
  ],
  run: (o, io) => trainCommand({ ...o, maxMemory: bytesFlag(o.maxMemory) }, io),
});

export const evalCmd = defineCommand({
  name: 'eval',
  summary: 'Evaluate a saved model: P@k, nDCG@k and PSP@k at k = 1, 3, 5 (or the cut-offs of --k).',
  flags: {
    model: { type: 'string', required: true, valueName: 'model', description: 'model file written by train --save' },
    test: { type: 'string', required: true, valueName: 'file', description: 'test data' },
    format: { type: 'choice', choices: ['xc', 'libsvm', 'text'] as const, description: 'input format of the test data (default: text for a model trained on text, else xc)' },
    zeroBased,
    k: { type: 'string', valueName: 'list', description: 'cut-offs of P@k, nDCG@k and PSP@k, comma-separated (default: 1,3,5)' },
    threshold: {
      type: 'string', valueName: 't|model',
      description: 'a calibrated model: the probability threshold of the reported micro- and macro-F1 (default: model, the one chosen in training)',
    },
    workers,
    mode,
    candidates,
    propensityA,
    propensityB,
    maxMemory,
    json,
    quiet,
    distributed: {
      type: 'boolean',
      description: 'evaluate label-sharded as one rank of an MPI job: --model is the --checkpoint directory of train --distributed ' +
        '(each rank loads only its slice; any number of ranks)',
    },
  },
  examples: [
    'eval --model model.sl --test test.txt --json',
    'eval --model model.sl --test test.txt --k 1,5,10',
    'eval --model model.sl --test test.txt --mode sampled --json',
    'eval --model ckpt --test test.txt --distributed --json   (under mpirun -np 4; ckpt from train --distributed --checkpoint)',
  ],
  run: (o, io) => evalCommand({ ...o, threshold: parseThreshold(o.threshold), maxMemory: bytesFlag(o.maxMemory) }, io),
});

export const predictCmd = defineCommand({
  name: 'predict',
  summary: 'Print the top-k labels (or those above a probability threshold) of every input point, in input order.',
  description:
    'Output formats: xc (default) is the Extreme Classification Repository\'s score-matrix format: a header ' +
    '"points labels", then one line per point, "label:score" pairs in descending score order (point i of the ' +
    'input is line i + 2). jsonl prints one object per point: {"id": i, "labels": [...], "scores": [...]}, ' +
    'with i the 0-based position of the point in the input; its labels are names for a model trained on text ' +
    '(which reads raw text: one point per line, labels and a TAB before the text are ignored). Scores are softmax probabilities: they share one unit ' +
    'over all labels. A calibrated model (trained with held-out validation) also has per-label probabilities, P(label is relevant | point): jsonl ' +
    'prints them as "probabilities"; with --threshold the labels are chosen and ordered by them and the xc format prints them in place of the scores.',
  flags: {
    model: { type: 'string', required: true, valueName: 'model', description: 'model file written by train --save' },
    input: { type: 'string', required: true, valueName: 'file', description: 'points to label, or - for standard input (labels in the file are ignored)' },
    inputFormat: { type: 'choice', choices: ['xc', 'libsvm', 'text'] as const, description: 'format of the input (default: text for a model trained on text, else xc)' },
    zeroBased,
    format: {
      type: 'choice', choices: ['xc', 'jsonl'] as const,
      description: 'format of the output (see above; default: jsonl with label names for a model trained on text, else xc)',
      hint: 'the format of the input is --input-format',
    },
    k: { type: 'integer', min: 1, valueName: 'k', description: 'labels per point, at most the model\'s labels (default: 5, or all of a model\'s fewer labels; with --threshold: all that reach it)' },
    threshold: {
      type: 'string', valueName: 't|model',
      description: 'only the labels whose probability is at least t, in (0, 1], best first; \'model\': the threshold chosen in training. ' +
        'A calibrated model (trained with held-out validation) compares its calibrated probabilities; an older model its softmax scores (which sum to 1: at most 1/t labels). With --k, at most k of them',
    },
    explain: {
      type: 'integer', min: 1, valueName: 'n',
      description: 'jsonl: explain each label by the n input features (tokens, for a text model) that add most to its score (exact gradient x input of the network, plus the wide part and the re-ranker)',
    },
    workers,
    mode,
    candidates,
    maxMemory,
    quiet,
    distributed: {
      type: 'boolean',
      description: 'predict label-sharded as one rank of an MPI job: --model is the --checkpoint directory of train --distributed ' +
        '(each rank loads only its slice; rank 0 writes)',
    },
  },
  examples: [
    'predict --model model.sl --input test.txt --k 5 > scores.txt',
    'predict --model model.sl --input test.txt --format jsonl | head -3',
    'predict --model model.sl --input - --input-format libsvm < points.svm',
    'predict --model text-model.sl --input new-docs.txt --k 3',
    'predict --model model.sl --input test.txt --threshold 0.2 --format jsonl',
    'predict --model model.sl --input test.txt --threshold model --format jsonl',
    'predict --model text-model.sl --input new-docs.txt --k 3 --explain 5',
    'predict --model ckpt --input test.txt --distributed > scores.txt   (under mpirun -np 4)',
  ],
  run: (o, io) => predictCommand({ ...o, threshold: parseThreshold(o.threshold), maxMemory: bytesFlag(o.maxMemory) }, io),
});

export const demoCmd = defineCommand({
  name: 'demo',
  summary: 'The built-in default job: generate a synthetic dataset, train a sampled network, evaluate it.',
  flags: { workers, json, quiet, keep: { type: 'boolean', description: 'keep the generated data in its temporary folder' } },
  examples: ['demo', 'demo --json'],
  run: (o, io) => demoCommand(o, io),
});
