#!/usr/bin/env python3
"""Dense softmax on one GPU: time to a given P@1, for SLIDE's headline comparison (a sparse network on CPU
cores against the dense network on an accelerator).

The network is the one sublinear's defaults train at the Amazon-670K shape, without the sampling:

    EmbeddingBag(features, hidden, mode='sum') with per_sample_weights = feature values + bias -> ReLU
    -> Linear(hidden, labels) -> full softmax over every label

Loss and targets as pytorch_dense.py (targets 1/|labels| at each true label, softmax cross-entropy, mean over
the batch; points without labels are skipped in training and count as misses). Adam (torch's fused kernel)
over every parameter, Glorot-uniform weights, zero biases. What a GPU user would do for speed is allowed:
TF32 matrix products, bf16 autocast (--precision bf16; the loss is taken in fp32), large batches, the whole
data set resident on the GPU (batches are gathered there; nothing is copied per batch but the row numbers).

Clock: training time only (CUDA-synchronised at each evaluation, evaluation time excluded); `wall` adds the
evaluations. Evaluation: P@1/3/5 on all test points every --eval-every-seconds of training time. A run stops
when P@1 reaches the last of --targets, or after --max-seconds of training, or --max-epochs.

Input: --data FILE written by pack_xc.py (lzma-compressed, exact: values decoded from the text's decimals).
Output: JSON lines on stdout: {"event":"config",...}, {"event":"eval",...}*, {"event":"done",...} per config.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pack_xc import load_packed  # noqa: E402


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class DevCSR:
    """A CSR split resident on the device, with host copies of the row lengths (to size the gathers without a
    device synchronisation). A batch copies only its row numbers to the device, from pinned memory, so the host
    queues work ahead of the device instead of waiting for it."""

    def __init__(self, ds, dev):
        self.n = ds["points"]
        self.off = torch.from_numpy(ds["off"]).to(dev)
        self.idx = torch.from_numpy(ds["idx"]).to(dev)
        self.val = torch.from_numpy(ds["val"]).to(dev)
        self.loff = torch.from_numpy(ds["loff"]).to(dev)
        self.lab = torch.from_numpy(ds["lab"]).to(dev)
        self.rowlen = np.diff(ds["off"])
        self.lablen = np.diff(ds["loff"])
        self.dev = dev

    def _gather(self, offsets, rows, total):
        """Flat positions of the CSR rows `rows` (device) in `offsets`, and each row's first position."""
        starts = offsets[rows]
        lens = offsets[rows + 1] - starts
        first = torch.cumsum(lens, 0) - lens
        pos = torch.repeat_interleave(starts - first, lens, output_size=total)
        return pos + torch.arange(total, device=self.dev), lens, first

    def batch(self, rows_np):
        """((feature indices, bag offsets, values), (row in batch, label, weight 1/|labels|)) of the rows."""
        host = torch.from_numpy(rows_np)
        rows = (host.pin_memory() if self.dev.type == "cuda" else host).to(self.dev, non_blocking=True)
        pos, _, first = self._gather(self.off, rows, int(self.rowlen[rows_np].sum()))
        lpos, llens, _ = self._gather(self.loff, rows, int(self.lablen[rows_np].sum()))
        r = torch.repeat_interleave(torch.arange(len(rows_np), device=self.dev), llens, output_size=lpos.numel())
        w = (1.0 / torch.clamp(llens, min=1).float())[r]
        return (self.idx[pos], first, self.val[pos]), (r, self.lab[lpos], w)


class Net(nn.Module):
    def __init__(self, features, hidden, labels):
        super().__init__()
        self.emb = nn.EmbeddingBag(features, hidden, mode="sum")
        self.b0 = nn.Parameter(torch.zeros(hidden))
        self.out = nn.Linear(hidden, labels)
        nn.init.xavier_uniform_(self.emb.weight)
        nn.init.xavier_uniform_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, idx, offsets, vals):
        return self.out(torch.relu(self.emb(idx, offsets, per_sample_weights=vals) + self.b0))


def evaluate(net, test, precision, dev):
    """P@1, P@3, P@5 over every test point (points without labels count as misses)."""
    hits = np.zeros(3)
    step = 2048
    with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        for s in range(0, test.n, step):
            rows = np.arange(s, min(test.n, s + step), dtype=np.int64)
            x, (r, c, _) = test.batch(rows)
            top = net(*x).float().topk(5, dim=1).indices  # (rows, 5)
            truth = torch.zeros(len(rows), 5, dtype=torch.int32, device=top.device)
            match = (top[r] == c[:, None]).int()  # (true labels, 5)
            truth.index_put_((r,), match, accumulate=True)
            for j, k in enumerate((1, 3, 5)):
                hits[j] += truth[:, :k].sum().item() / k
    return (hits / test.n).tolist()


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def run_config(cfg, train, test, shape, targets, args, dev):
    torch.manual_seed(args.seed)
    net = Net(shape[0], cfg["hidden"], shape[1]).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=cfg["lr"], betas=(0.9, 0.999), eps=1e-8, fused=dev.type == "cuda")
    rng = np.random.default_rng(args.seed + 1)
    labelled = np.nonzero(train.lablen > 0)[0].astype(np.int64)
    bs = cfg["batch"]
    emit({"event": "config", **cfg, "trainPoints": int(len(labelled)),
          "parameters": int(sum(p.numel() for p in net.parameters()))})
    reached = {}
    train_s, eval_s, samples, batches, epoch = 0.0, 0.0, 0, 0, 0
    next_eval = args.eval_every_seconds
    curve = []
    done = False
    sync(dev)
    t_start = time.perf_counter()
    seg_start = t_start
    while not done and epoch < args.max_epochs:
        epoch += 1
        perm = labelled[rng.permutation(len(labelled))]
        for s in range(0, len(perm), bs):
            rows = perm[s:s + bs]
            x, (r, c, w) = train.batch(rows)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cfg["precision"] == "bf16"):
                logits = net(*x)
            logits = logits.float()
            loss = (torch.logsumexp(logits, 1).sum() - (logits[r, c] * w).sum()) / len(rows)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            samples += len(rows)
            batches += 1
            # The host runs ahead of the device; the clock is read after a synchronisation only.
            if time.perf_counter() - seg_start + train_s >= next_eval or s + bs >= len(perm):
                sync(dev)
                now = time.perf_counter()
                train_s += now - seg_start
                p = evaluate(net, test, cfg["precision"], dev)
                sync(dev)
                after = time.perf_counter()
                eval_s += after - now
                seg_start = after
                next_eval = train_s + args.eval_every_seconds
                rec = {"event": "eval", "name": cfg["name"], "trainSeconds": round(train_s, 3), "epoch": epoch,
                       "samples": samples, "p1": p[0], "p3": p[1], "p5": p[2], "loss": float(loss.item())}
                curve.append([rec["trainSeconds"], p[0]])
                for t in targets:
                    if p[0] >= t and str(t) not in reached:
                        reached[str(t)] = {"trainSeconds": round(train_s, 3), "epoch": epoch, "samples": samples}
                emit(rec)
                if not math.isfinite(rec["loss"]) or p[0] >= targets[-1] or train_s >= args.max_seconds:
                    done = True
                    break
    best = max(curve, key=lambda c: c[1]) if curve else None
    emit({"event": "done", "name": cfg["name"], "trainSeconds": round(train_s, 3), "evalSeconds": round(eval_s, 3),
          "samples": samples, "batches": batches, "epochs": epoch, "samplesPerSec": samples / max(train_s, 1e-9),
          "best": best, "reached": reached,
          "peakGpuBytes": torch.cuda.max_memory_allocated() if dev.type == "cuda" else None})
    del net, opt
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--configs", required=True,
                    help="JSON list of {name, batch, lr, hidden, precision: 'tf32'|'bf16'}")
    ap.add_argument("--targets", default="0.9", help="comma-separated P@1 values; the run stops at the last")
    ap.add_argument("--max-seconds", type=float, default=60)
    ap.add_argument("--max-epochs", type=int, default=1000)
    ap.add_argument("--eval-every-seconds", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cuda (the measurement) or cpu (a smoke test)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device(a.device)
    t0 = time.perf_counter()
    data = load_packed(a.data)
    t1 = time.perf_counter()
    train, test = DevCSR(data["train"], dev), DevCSR(data["test"], dev)
    sync(dev)
    shape = (data["train"]["features"], data["train"]["labels"])
    emit({"event": "start", "torch": torch.__version__,
          "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None,
          "decodeSeconds": round(t1 - t0, 3), "uploadSeconds": round(time.perf_counter() - t1, 3),
          "train": [train.n, *shape], "test": test.n})
    targets = sorted(float(x) for x in a.targets.split(","))
    for cfg in json.loads(a.configs):
        run_config(cfg, train, test, shape, targets, a, dev)


if __name__ == "__main__":
    main()
