// Shared by the build, prepack and install scripts: where the addon lives and how a build is identified.
// CommonJS because npm runs these scripts before (or without) the TypeScript build.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
/** The file node-gyp writes (binding.gyp's target_name). */
const RELEASE_ADDON = path.join(ROOT, 'build', 'Release', 'sublinear.node');
/** Written next to RELEASE_ADDON by build-native.cjs: what it was built from and how. */
const BUILD_STAMP = path.join(ROOT, 'build', 'Release', 'sublinear.build.json');

/**
 * The prebuilt binary's file for this platform, named the way node-gyp-build's loader matches it:
 * prebuilds/<platform>-<arch>/<name>.napi[.glibc|.musl].node (one Node-API binary serves every Node
 * version with Node-API 8, i.e. every Node >= 20; the libc tag keeps a glibc binary away from musl).
 */
function prebuildFile(platform = process.platform, arch = process.arch) {
  const libc = platform === 'linux' ? (fs.existsSync('/etc/alpine-release') ? 'musl' : 'glibc') : '';
  return path.join(ROOT, 'prebuilds', `${platform}-${arch}`, `sublinear.napi${libc ? `.${libc}` : ''}.node`);
}

/**
 * A hash of everything the compiled addon depends on: binding.gyp, the C++ sources, the node-addon-api
 * headers' version, the Node version built against and the build options. Equal hashes mean that a
 * rebuild would compile the same code with the same flags.
 */
function sourceFingerprint(options) {
  const h = crypto.createHash('sha256');
  const add = (name, data) => h.update(`${name}\0${data.length}\0`).update(data);
  add('binding.gyp', fs.readFileSync(path.join(ROOT, 'binding.gyp')));
  for (const f of fs.readdirSync(path.join(ROOT, 'native')).sort()) {
    add(`native/${f}`, fs.readFileSync(path.join(ROOT, 'native', f)));
  }
  let napiVersion = 'unknown';
  try {
    napiVersion = require(require.resolve('node-addon-api/package.json', { paths: [ROOT] })).version;
  } catch {
    /* not installed: the build itself will fail */
  }
  add('node-addon-api', napiVersion);
  add('node', process.version);
  add('options', JSON.stringify(options));
  return h.digest('hex');
}

/** Build options that change the binary (see build-native.cjs). */
function buildOptions(env = process.env) {
  return { marchNative: env.SUBLINEAR_MARCH_NATIVE === '1' };
}

module.exports = { ROOT, RELEASE_ADDON, BUILD_STAMP, prebuildFile, sourceFingerprint, buildOptions };
