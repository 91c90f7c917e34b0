// Checksum verification of a binfile (src/util/binfile.ts) without keeping any of its contents.
//
// readBinFile verifies the checksum while it streams sections into their destinations, which means the
// destinations (a whole network: weights, Adam moments, hash tables) are allocated from the header's
// configuration before the checksum has vouched for it. A corrupted digit in a header (`"rangeBits":12`
// read as `"rangeBits":22`, `"L":16` as `"L":96`) would then allocate gigabytes before the damage is
// detected. Model and checkpoint loaders therefore call this first: one streaming pass over the file
// with a fixed 8 MiB buffer, then allocate.
import { open } from 'node:fs/promises';
import xxhash from 'xxhash-wasm';
import { BinFileError } from './binfile.js';

const TRAILER_BYTES = 16;
const CHUNK = 8 * 1024 * 1024;

let api: ReturnType<typeof xxhash> | undefined;

/**
 * Throws BinFileError (problem 'checksum' or 'truncated') unless the file's trailer holds its exact
 * length and the xxhash64 (seed 0) of every byte before the hash, as writeBinFile stores them.
 * Structure (magic, version, header) is not checked here: readBinFile does that.
 */
export async function verifyBinFileChecksum(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    const size = (await fh.stat()).size;
    if (size < 16 + TRAILER_BYTES) throw new BinFileError(path, 'truncated', `truncated: expected at least ${16 + TRAILER_BYTES} bytes, found ${size}`);
    const buf = new Uint8Array(Math.min(CHUNK, size));
    const readFully = async (view: Uint8Array, pos: number) => {
      for (let off = 0; off < view.length; ) {
        const { bytesRead } = await fh.read(view, off, view.length - off, pos + off);
        if (bytesRead === 0) throw new BinFileError(path, 'truncated', `truncated: the file ended at byte ${pos + off} while reading (was it modified during the read?)`);
        off += bytesRead;
      }
    };
    const trailer = new Uint8Array(TRAILER_BYTES);
    await readFully(trailer, size - TRAILER_BYTES);
    const tv = new DataView(trailer.buffer);
    if (tv.getBigUint64(0, true) !== BigInt(size)) throw new BinFileError(path, 'checksum', 'checksum mismatch (file is corrupt or truncated)');
    const hasher = (await (api ??= xxhash())).create64(0n);
    for (let pos = 0; pos < size - 8; ) {
      const n = Math.min(buf.length, size - 8 - pos);
      const view = buf.subarray(0, n);
      await readFully(view, pos);
      hasher.update(view);
      pos += n;
    }
    if (hasher.digest() !== tv.getBigUint64(8, true)) throw new BinFileError(path, 'checksum', 'checksum mismatch (file is corrupt or truncated)');
  } finally {
    await fh.close();
  }
}
