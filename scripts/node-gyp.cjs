// Shared by build-native.cjs and build-mpi.cjs: node-gyp (bundled with npm) and the running Node's own
// headers, so that builds work offline (node-gyp would otherwise try to download headers).
'use strict';
const fs = require('node:fs');
const path = require('node:path');

/** The node-gyp script npm bundles (npm exposes its path as npm_config_node_gyp), or null. */
function findNodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    '/usr/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js',
    '/usr/share/nodejs/node-gyp/bin/node-gyp.js',
  ];
  for (const c of candidates) if (c && fs.existsSync(c)) return c;
  return null;
}

/** A directory with include/node/node_api.h for --nodedir (the running Node's headers), or null. */
function findNodeDir() {
  for (const c of [process.env.npm_config_nodedir, path.join(path.dirname(process.execPath), '..'), '/usr']) {
    if (c && fs.existsSync(path.join(c, 'include', 'node', 'node_api.h'))) return c;
  }
  return null;
}

module.exports = { findNodeGyp, findNodeDir };
