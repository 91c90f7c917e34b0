// The flags bench:engine and bench:scaling share: the synthetic dataset and the training run each of
// their child processes (bench/train-run.ts) makes.
import { SHAPE_NAMES } from '../src/datasets/index.js';

export const SYNTHETIC_RUN_FLAGS = {
  shape: { type: 'choice', choices: SHAPE_NAMES, default: 'amazon-670k', description: 'synthetic dataset shape' },
  labels: { type: 'integer', min: 1, valueName: 'n', description: "label count (default: the shape's)" },
  train: { type: 'integer', min: 1, default: 30000, valueName: 'n', description: 'training points' },
  test: { type: 'integer', min: 1, default: 2000, valueName: 'n', description: 'test points' },
  epochs: { type: 'integer', min: 1, default: 1, valueName: 'n', description: 'passes over the training data' },
  seed: { type: 'integer', min: 0, default: 1, valueName: 'n', description: 'data and network seed' },
  lr: { type: 'number', min: 0, default: 1e-2, valueName: 'x', description: 'Adam learning rate' },
} as const;
