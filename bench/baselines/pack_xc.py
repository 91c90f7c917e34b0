#!/usr/bin/env python3
"""Packs an extreme-classification data set (train.txt and test.txt in the XC text format) into one small,
exact file for pytorch_gpu.py, small enough to travel to an accelerator machine with the data:

    python3 pack_xc.py DIR OUT      # DIR holds train.txt and test.txt

Per split: the header's (points, features, labels); each row's feature indices delta-coded (first one absolute;
indices must be ascending within a row); each value as the decimal the text writes (mantissa uint16, exponent
int8: the reader divides by a power of ten, which gives the same double as parsing the text); label counts and
labels. numpy's .npz of those arrays, lzma-compressed.
"""
import io
import lzma
import os
import sys

import numpy as np


def read(path):
    with open(path) as f:
        n, d, labels = map(int, f.readline().split())
        off, idx, man, ex, loff, lab = [0], [], [], [], [0], []
        for lineno, line in enumerate(f, start=2):
            parts = line.rstrip("\n").split(" ")
            head = "" if ":" in parts[0] else parts[0]
            feats = parts if head == "" else parts[1:]
            if head:
                lab.extend(int(x) for x in head.split(","))
            loff.append(len(lab))
            for t in feats:
                if not t:
                    continue
                a, b = t.split(":")
                if "e" in b or "E" in b or b.startswith("-"):
                    raise SystemExit(f"{path}:{lineno}: value {b!r}: only plain non-negative decimals are packed")
                ip, _, fp = b.partition(".")
                m = int(ip + fp)
                if m >= 65536:
                    raise SystemExit(f"{path}:{lineno}: value {b!r} has more digits than a uint16 mantissa holds")
                idx.append(int(a))
                man.append(m)
                ex.append(-len(fp))
            off.append(len(idx))
    if len(off) != n + 1:
        raise SystemExit(f"{path}: the header says {n} points, the file has {len(off) - 1}")
    off, idx = np.array(off, np.int64), np.array(idx, np.int64)
    delta = idx.copy()
    delta[1:] -= idx[:-1]
    starts = off[:-1][np.diff(off) > 0]
    delta[starts] = idx[starts]
    if (delta < 0).any():
        raise SystemExit(f"{path}: feature indices must be ascending within each row")
    return {"shape": np.array([n, d, labels], np.int64), "rowlen": np.diff(off).astype(np.uint32),
            "delta": delta.astype(np.uint32), "man": np.array(man, np.uint16), "ex": np.array(ex, np.int8),
            "lablen": np.diff(np.array(loff, np.int64)).astype(np.uint32), "lab": np.array(lab, np.uint32)}


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: pack_xc.py DIR OUT")
    src, dst = sys.argv[1:]
    arrays = {}
    for split in ("train", "test"):
        for k, v in read(f"{src}/{split}.txt").items():
            arrays[f"{split}_{k}"] = v
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = lzma.compress(buf.getvalue(), preset=6)
    with open(dst + ".tmp", "wb") as f:
        f.write(data)
    os.replace(dst + ".tmp", dst)


if __name__ == "__main__":
    main()
