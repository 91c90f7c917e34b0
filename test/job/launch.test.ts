// launch() (src/job/launch.ts): the mpirun command line it builds, what it refuses, and `--` handing the rest
// of the command line on whole (src/cli/args.ts). Its signals under mpirun are tested in
// test/train/sharded.test.ts (they need Open MPI).
import { describe, expect, it } from 'vitest';
import { launch, launchArgv } from '../../src/job/launch.js';
import { defineCommand, parseCommandArgs } from '../../src/cli/args.js';

describe('launchArgv', () => {
  it('runs this Node and this CLI in every rank, adds --distributed, and passes hosts and mpirun arguments before the program', () => {
    const argv = launchArgv({ ranks: 4, command: ['train', '--train', 't.txt'], hostfile: 'hosts', mpirunArgs: ['--mca', 'btl', 'tcp,self'] });
    expect(argv.slice(0, 8)).toEqual(['mpirun', '-np', '4', '--hostfile', 'hosts', '--mca', 'btl', 'tcp,self']);
    expect(argv[8]).toBe(process.execPath);
    expect(argv[9]).toMatch(/[/\\]src[/\\]cli\.js$/);
    expect(argv.slice(10)).toEqual(['train', '--train', 't.txt', '--distributed']);
    // Given already: not twice.
    expect(launchArgv({ ranks: 2, command: ['eval', '--distributed'], host: 'a:1,b:1' }).filter((a) => a === '--distributed')).toHaveLength(1);
    expect(launchArgv({ ranks: 2, command: ['eval'], host: 'a:1,b:1' })).toContain('a:1,b:1');
  });

  it('refuses a missing or non-MPI command and a bad number of ranks', () => {
    expect(() => launchArgv({ ranks: 2, command: [] })).toThrow('missing the command the ranks run');
    expect(() => launchArgv({ ranks: 2, command: ['plan'] })).toThrow("'plan' does not run under MPI");
    expect(() => launchArgv({ ranks: 0, command: ['train'] })).toThrow('-np expects a positive number of ranks');
  });

  it('says what to install when mpirun is missing', async () => {
    await expect(launch({ ranks: 1, command: ['train'], mpirun: 'no-such-mpirun-here' })).rejects.toThrow('no-such-mpirun-here: not found (install Open MPI');
  });
});

describe('parseCommandArgs with rest', () => {
  const spec = defineCommand({ name: 'x', summary: 'x', rest: { name: 'command', description: 'c' }, flags: { ranks: { type: 'integer', short: 'n', description: 'n' } }, run: async () => 0 }).spec;
  it('hands everything after -- on whole, its flags not parsed', () => {
    expect(parseCommandArgs(spec, ['-n', '2', '--', 'train', '--epochs', '3', '--', 'x'])).toEqual({ ranks: 2, command: ['train', '--epochs', '3', '--', 'x'] });
    expect(parseCommandArgs(spec, ['-n', '2'])).toEqual({ ranks: 2, command: [] });
    expect(() => parseCommandArgs(spec, ['-n', '2', 'train'])).toThrow("unexpected argument 'train'");
  });
});
