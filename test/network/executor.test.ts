// The pool's worker module: what a piscina thread loads when it starts must be one of the module's exports.
// Piscina preloads `name` as each thread starts; when the module lacks that export, piscina retries with
// import() of the module it has just require()d, and on Node 20.19-20.20 that import() racing a task's
// require() of the same ES module aborts the process (a V8 fatal error). A rename of the exports or of the
// preloaded name would bring that back without failing any other test.
import { describe, expect, it } from 'vitest';
import { PRELOADED_EXPORT } from '../../src/network/executor.js';
import * as worker from '../../src/network/worker.js';

describe('PoolExecutor', () => {
  it('preloads an export the worker module has, so threads never fall back to import()', () => {
    expect(typeof (worker as Record<string, unknown>)[PRELOADED_EXPORT]).toBe('function');
  });
});
