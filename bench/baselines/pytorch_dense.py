#!/usr/bin/env python3
"""Dense PyTorch baseline for sublinear's benchmarks (driven by bench/baselines/pytorch.ts).

Trains the network sublinear trains, written the way a PyTorch user would:

    EmbeddingBag(features, hidden[0], mode='sum', sparse=True) with per_sample_weights = feature values
    + bias -> ReLU -> [Linear -> ReLU]* -> Linear(hidden[-1], labels) -> full softmax

Loss: softmax cross-entropy against targets y_j = 1/|labels| at each true label, i.e.
mean_i( logsumexp(logits_i) - sum_j y_ij * logits_ij ) computed by gathering the true-label logits
(identical to cross_entropy with a dense probability target, without building the batch x labels target).
Points without labels are skipped in training and count as misses in P@1.

Optimiser (--embedding-optimizer):
  sparse_adam (default): the input layer's gradient is sparse (EmbeddingBag(sparse=True)) and is updated
     by torch.optim.SparseAdam (lazy: only rows present in the batch; bias correction by the global
     step); every other parameter by torch.optim.Adam. This is PyTorch's documented recipe for large
     embedding tables and the fastest option here.
  adam: dense gradient for the input layer too, one torch.optim.Adam over everything.
Init: Glorot/Xavier uniform for every weight matrix, zero biases, torch.manual_seed(seed).
Threads: torch.set_num_threads(--threads) (intra-op); inter-op threads 1.

Input: --data DIR holding header.json and raw little-endian arrays (see pytorch.ts).
Output: JSON lines on stdout: {"event":"start",...}, {"event":"eval",...}*, {"event":"done",...}.
Training time excludes evaluation time.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn


def _finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v


def emit(obj):
    sys.stdout.write(json.dumps(_finite(obj)) + "\n")
    sys.stdout.flush()


def load_split(d, spec):
    if spec is None:
        return None
    def arr(key, dtype):
        return np.fromfile(os.path.join(d, spec["files"][key]), dtype=dtype)
    ds = {
        "points": spec["points"], "features": spec["features"], "labels": spec["labels"],
        "offsets": arr("offsets", "<u4").astype(np.int64),
        "indices": arr("indices", "<u4").astype(np.int64),
        "values": arr("values", "<f4"),
        "labelOffsets": arr("labelOffsets", "<u4").astype(np.int64),
        "labelIndices": arr("labelIndices", "<u4").astype(np.int64),
    }
    assert len(ds["offsets"]) == ds["points"] + 1 and len(ds["labelOffsets"]) == ds["points"] + 1
    assert len(ds["indices"]) == ds["offsets"][-1] and len(ds["values"]) == ds["offsets"][-1]
    assert len(ds["labelIndices"]) == ds["labelOffsets"][-1]
    return ds


def gather_rows(offsets, rows):
    """Flat positions of CSR rows `rows` plus per-row lengths."""
    starts = offsets[rows]
    lens = offsets[rows + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), lens
    row_base = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return row_base + np.arange(total, dtype=np.int64), lens


def batch_inputs(ds, rows):
    pos, lens = gather_rows(ds["offsets"], rows)
    bag_offsets = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
    return (torch.from_numpy(ds["indices"][pos]), torch.from_numpy(bag_offsets),
            torch.from_numpy(ds["values"][pos]))


def batch_labels(ds, rows):
    pos, lens = gather_rows(ds["labelOffsets"], rows)
    r = np.repeat(np.arange(len(rows), dtype=np.int64), lens)
    w = np.repeat((1.0 / np.maximum(lens, 1)).astype(np.float32), lens)
    return torch.from_numpy(r), torch.from_numpy(ds["labelIndices"][pos]), torch.from_numpy(w)


class Net(nn.Module):
    def __init__(self, features, hidden, labels, sparse):
        super().__init__()
        self.emb = nn.EmbeddingBag(features, hidden[0], mode="sum", sparse=sparse)
        self.b0 = nn.Parameter(torch.zeros(hidden[0]))
        dims = list(hidden) + [labels]
        self.layers = nn.ModuleList(nn.Linear(dims[k], dims[k + 1]) for k in range(len(dims) - 1))
        nn.init.xavier_uniform_(self.emb.weight)
        for lin in self.layers:
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, idx, offsets, vals):
        h = torch.relu(self.emb(idx, offsets, per_sample_weights=vals) + self.b0)
        for k, lin in enumerate(self.layers):
            h = lin(h)
            if k + 1 < len(self.layers):
                h = torch.relu(h)
        return h


def p_at_1(net, ds, rows, labels):
    if len(rows) == 0:
        return float("nan")
    step = max(1, min(4096, (2 ** 25) // max(1, labels)))
    hits = 0
    with torch.no_grad():
        for s in range(0, len(rows), step):
            sub = rows[s:s + step]
            pred = net(*batch_inputs(ds, sub)).argmax(1).numpy()
            r, c, _ = batch_labels(ds, sub)
            r, c = r.numpy(), c.numpy()
            hit = c == pred[r]
            hits += int(np.count_nonzero(np.bincount(r[hit], minlength=len(sub))))
    return hits / len(rows)


def eval_subset(n, k, seed):
    if k >= n:
        return np.arange(n, dtype=np.int64)
    return np.sort(np.random.default_rng(seed ^ 0x5EED).permutation(n)[:k]).astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--hidden", default="128", help="comma-separated hidden sizes")
    ap.add_argument("--epochs", type=float, default=math.inf)
    ap.add_argument("--max-batches", type=float, default=math.inf)
    ap.add_argument("--max-seconds", type=float, default=math.inf)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-every-batches", type=float, default=math.inf)
    ap.add_argument("--eval-every-seconds", type=float, default=math.inf)
    ap.add_argument("--eval-points", type=int, default=2000)
    ap.add_argument("--final-eval-points", type=int, default=-1)
    ap.add_argument("--eval-at-start", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--warmup-batches", type=int, default=0)
    ap.add_argument("--embedding-optimizer", choices=["sparse_adam", "adam"], default="sparse_adam")
    a = ap.parse_args()
    if math.isinf(a.epochs) and math.isinf(a.max_batches) and math.isinf(a.max_seconds):
        a.epochs = 1

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(a.seed)

    with open(os.path.join(a.data, "header.json")) as f:
        header = json.load(f)
    train = load_split(a.data, header["train"])
    test = load_split(a.data, header.get("test"))
    L = train["labels"]
    hidden = [int(x) for x in a.hidden.split(",") if x]
    sparse = a.embedding_optimizer == "sparse_adam"
    net = Net(train["features"], hidden, L, sparse)
    betas = (a.beta1, a.beta2)
    if sparse:
        dense_params = [p for n, p in net.named_parameters() if n != "emb.weight"]
        opts = [torch.optim.SparseAdam([net.emb.weight], lr=a.lr, betas=betas, eps=a.eps),
                torch.optim.Adam(dense_params, lr=a.lr, betas=betas, eps=a.eps)]
    else:
        opts = [torch.optim.Adam(net.parameters(), lr=a.lr, betas=betas, eps=a.eps)]

    lab_lens = np.diff(train["labelOffsets"])
    train_rows = np.nonzero(lab_lens > 0)[0].astype(np.int64)
    n_test = test["points"] if test else 0
    eval_rows = eval_subset(n_test, min(n_test, a.eval_points), a.seed)
    fe = n_test if a.final_eval_points < 0 else min(n_test, a.final_eval_points)
    final_rows = eval_subset(n_test, fe, a.seed + 7)
    rng = np.random.default_rng(a.seed + 1)

    emit({"event": "start", "torch": torch.__version__, "threads": torch.get_num_threads(),
          "embeddingOptimizer": a.embedding_optimizer, "trainPoints": int(len(train_rows))})

    st = {"seconds": 0.0, "eval_seconds": 0.0, "samples": 0, "batches": 0, "loss_sum": 0.0, "loss_n": 0,
          "last_eval_batch": -1, "last_eval_seconds": 0.0, "warm_seconds": 0.0, "warm_samples": 0}
    curve = []
    recent = []
    batch_seconds = []

    def evaluate():
        if test is None or len(eval_rows) == 0:
            return
        t0 = time.perf_counter()
        net.eval()
        p1 = p_at_1(net, test, eval_rows, L)
        net.train()
        st["eval_seconds"] += time.perf_counter() - t0
        rec = {"event": "eval", "seconds": st["seconds"], "samples": st["samples"], "batches": st["batches"],
               "p1": p1, "loss": st["loss_sum"] / st["loss_n"] if st["loss_n"] else None}
        curve.append({"seconds": st["seconds"], "samples": st["samples"], "p1": p1})
        st["loss_sum"], st["loss_n"] = 0.0, 0
        st["last_eval_batch"], st["last_eval_seconds"] = st["batches"], st["seconds"]
        emit(rec)

    diverged = False
    periodic = not (math.isinf(a.eval_every_batches) and math.isinf(a.eval_every_seconds))
    if a.eval_at_start:
        evaluate()

    def done():
        return st["batches"] >= a.max_batches or st["seconds"] >= a.max_seconds or diverged

    epoch = 0
    while epoch < a.epochs and not done() and len(train_rows) > 0:
        order = rng.permutation(train_rows)
        for s in range(0, len(order), a.batch_size):
            if done():
                break
            t0 = time.perf_counter()
            rows = order[s:s + a.batch_size]
            idx, offs, vals = batch_inputs(train, rows)
            lr_rows, lr_cols, lr_w = batch_labels(train, rows)
            logits = net(idx, offs, vals)
            lse = torch.logsumexp(logits, 1)
            loss = (lse.sum() - (logits[lr_rows, lr_cols] * lr_w).sum()) / len(rows)
            for o in opts:
                o.zero_grad(set_to_none=True)
            loss.backward()
            for o in opts:
                o.step()
            lv = float(loss.item())
            dt = time.perf_counter() - t0
            st["seconds"] += dt
            batch_seconds.append(dt)
            st["batches"] += 1
            if not math.isfinite(lv):
                diverged = True
                break
            st["samples"] += len(rows)
            if st["batches"] == a.warmup_batches:
                st["warm_seconds"], st["warm_samples"] = st["seconds"], st["samples"]
            st["loss_sum"] += lv
            st["loss_n"] += 1
            recent.append(lv)
            del recent[:-10]
            if (st["batches"] - st["last_eval_batch"] >= a.eval_every_batches
                    or st["seconds"] - st["last_eval_seconds"] >= a.eval_every_seconds):
                evaluate()
        epoch += 1

    if st["last_eval_batch"] != st["batches"] and len(eval_rows) > 0 and (periodic or a.eval_at_start):
        evaluate()
    final_p1 = None
    if test is not None and len(final_rows) > 0:
        t0 = time.perf_counter()
        net.eval()
        final_p1 = p_at_1(net, test, final_rows, L)
        st["eval_seconds"] += time.perf_counter() - t0
    emit({
        "event": "done",
        "seconds": st["seconds"], "samples": st["samples"], "batches": st["batches"],
        "batchSeconds": batch_seconds,
        "samplesPerSec": st["samples"] / st["seconds"] if st["seconds"] > 0 else 0,
        "steadySamplesPerSec": ((st["samples"] - st["warm_samples"]) / (st["seconds"] - st["warm_seconds"])
                                if st["batches"] > a.warmup_batches and st["seconds"] > st["warm_seconds"] else None),
        "finalP1": final_p1, "curve": curve, "diverged": diverged,
        "finalLoss": sum(recent) / len(recent) if recent else None,
        "evalSeconds": st["eval_seconds"],
        "peakRssBytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "embeddingOptimizer": a.embedding_optimizer,
    })


if __name__ == "__main__":
    main()
