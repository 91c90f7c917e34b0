#!/usr/bin/env python3
"""Packs an extreme-classification data set (train.txt and test.txt in the XC text format) into one small,
exact file for pytorch_gpu.py, small enough to travel to an accelerator machine with the data:

    python3 pack_xc.py DIR OUT      # DIR holds train.txt and test.txt

Per split: the header's (points, features, labels); each row's feature indices delta-coded (first one absolute;
indices must be ascending within a row); each value as the decimal the text writes (mantissa uint16, exponent
int8: the reader divides by a power of ten, which gives the same double as parsing the text); label counts and
labels. numpy's .npz of those arrays, lzma-compressed. `load_packed(path)` reads it back as CSR arrays.

    python3 pack_xc.py --check DIR FILE   # reads FILE back and compares it with DIR's text, exits 1 on a difference
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


def load_packed(path):
    """Both splits of a pack_xc.py file as CSR numpy arrays (feature indices int64, values float32)."""
    z = np.load(io.BytesIO(lzma.decompress(open(path, "rb").read())))
    out = {}
    for split in ("train", "test"):
        n, d, labels = (int(x) for x in z[f"{split}_shape"])
        rowlen = z[f"{split}_rowlen"].astype(np.int64)
        off = np.zeros(n + 1, np.int64)
        np.cumsum(rowlen, out=off[1:])
        delta = z[f"{split}_delta"].astype(np.int64)
        # Indices are delta-coded within each row (the row's first entry absolute): a running sum restarted
        # at every row start.
        cs = np.cumsum(delta)
        nonempty = rowlen > 0
        before = np.zeros(n, np.int64)
        before[nonempty] = cs[off[:-1][nonempty]] - delta[off[:-1][nonempty]]
        idx = cs - np.repeat(before, rowlen)
        # Division by an exact power of ten rounds once: the same double as parsing the decimal text.
        man = z[f"{split}_man"].astype(np.float64)
        ex = z[f"{split}_ex"].astype(np.int64)
        val = (man / np.power(10.0, -ex)).astype(np.float32)
        lablen = z[f"{split}_lablen"].astype(np.int64)
        loff = np.zeros(n + 1, np.int64)
        np.cumsum(lablen, out=loff[1:])
        lab = z[f"{split}_lab"].astype(np.int64)
        assert idx.min() >= 0 and idx.max() < d and (lab.size == 0 or lab.max() < labels)
        out[split] = dict(points=n, features=d, labels=labels, off=off, idx=idx, val=val, loff=loff, lab=lab)
    return out


def parse_text(path):
    """The split as plain CSR arrays, parsed independently of the packing (values through float())."""
    with open(path) as f:
        n, d, labels = map(int, f.readline().split())
        off, idx, val, loff, lab = [0], [], [], [0], []
        for line in f:
            parts = line.split()
            if parts and ":" not in parts[0]:
                lab.extend(int(x) for x in parts[0].split(","))
                parts = parts[1:]
            loff.append(len(lab))
            for t in parts:
                a, b = t.split(":")
                idx.append(int(a))
                val.append(float(b))
            off.append(len(idx))
    return {"points": n, "features": d, "labels": labels, "off": np.array(off, np.int64),
            "idx": np.array(idx, np.int64), "val": np.array(val, np.float32),
            "loff": np.array(loff, np.int64), "lab": np.array(lab, np.int64)}


def check(src, packed):
    """Names the first array of `packed` that differs from the text in `src`, or None."""
    got = load_packed(packed)
    for split in ("train", "test"):
        want = parse_text(f"{src}/{split}.txt")
        for k, v in want.items():
            same = v == got[split][k] if isinstance(v, int) else (
                v.shape == got[split][k].shape and bool((v == got[split][k]).all()))
            if not same:
                return f"{split}.{k}"
    return None


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        bad = check(sys.argv[2], sys.argv[3])
        if bad:
            raise SystemExit(f"{sys.argv[3]}: {bad} differs from the text in {sys.argv[2]}")
        print("same")
        return
    if len(sys.argv) != 3:
        raise SystemExit("usage: pack_xc.py DIR OUT | pack_xc.py --check DIR FILE")
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
