// A run whose loss blows up stops with DivergedError (naming the batch, suggesting a lower lr) instead of
// training on and returning a network of NaNs; a sane learning rate on the same data does not trip it.
import { describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { DivergedError, DIVERGED_LOSS } from '../../src/train/fit.js';
import { randomData } from '../network/helpers.js';
import { fit } from '../../src/train/fit-network.js';

const data = randomData(600, 300, 40, 5, { shared: true, maxNnz: 12 });
const config = { inputDim: 300, seed: 2, layers: [{ size: 32 }, { size: 40 }] };

describe('fit stops on a diverging loss', () => {
  it('throws DivergedError at the first batch whose mean loss is not finite or above DIVERGED_LOSS', async () => {
    const net = new Network(config);
    const err = await fit(net, data, { epochs: 5, lr: 1e9, workers: 0 }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(DivergedError);
    const d = err as DivergedError;
    expect(d.epoch).toBe(0);
    expect(!(d.loss <= DIVERGED_LOSS)).toBe(true);
    expect(d.message).toBe(`training diverged: the mean loss of batch ${d.batch + 1} of epoch 1 is ${d.loss.toPrecision(4)}; ` +
      'the learning rate 1000000000 is too high for this data: try a lower one (e.g. 100000000)');
  });

  it('does not stop a run with a sane learning rate', async () => {
    const stats = await fit(new Network(config), data, { epochs: 3, lr: 1e-2, workers: 0 });
    expect(stats.epochs).toBe(3);
    expect(stats.lastLoss).toBeLessThan(Math.log(40) + 1);
  });
});
