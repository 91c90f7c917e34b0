// A network configuration is strict: an unknown key anywhere (a typo) is a ConfigError naming its path and
// the nearest known key, and a training option put in the network's configuration says where it belongs.
import { describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig, type NetworkConfig } from '../../src/network/config.js';
import { Network } from '../../src/network/network.js';

const base = { inputDim: 10, layers: [{ size: 8 }, { size: 5 }] };
const bad = (c: unknown) => () => resolveConfig(c as NetworkConfig);

describe('resolveConfig rejects unknown keys', () => {
  it('names the path and suggests the nearest key', () => {
    expect(bad({ ...base, layers: [{ size: 8, activaton: 'linear' }, { size: 5 }] })).toThrow(new ConfigError('Unknown option layers[0].activaton (did you mean layers[0].activation?)'));
    expect(bad({ ...base, layers: [{ size: 8, dropuot: 0.5 }, { size: 5 }] })).toThrow('Unknown option layers[0].dropuot (did you mean layers[0].dropout?)');
    expect(bad({ ...base, layers: [{ size: 8 }, { size: 5, sampling: { hash: 'dwta', l: 4 } }] })).toThrow('Unknown option layers[1].sampling.l (did you mean layers[1].sampling.L?)');
    expect(bad({ ...base, sed: 3 })).toThrow('Unknown option sed (did you mean seed?)');
    expect(bad({ ...base, colour: 'blue' })).toThrow(/^Unknown option colour$/);
  });

  it('points a training option to train()', () => {
    expect(bad({ ...base, epochs: 3 })).toThrow('Unknown option epochs (epochs is a training option: give it to train() (or next to the network in a --config file))');
    expect(() => new Network({ ...base, lr: 0.1 } as NetworkConfig)).toThrow('Unknown option lr (lr is a training option: give it to train() (or next to the network in a --config file))');
  });

  it('accepts every documented key', () => {
    expect(() => resolveConfig({ inputDim: 10, seed: 2, layers: [{ size: 8, activation: 'relu', dropout: 0.5 }, { size: 5, activation: 'softmax', sampling: { hash: 'simhash', K: 2, L: 3 } }] })).not.toThrow();
  });
});
