"""A small PyTorch program for a gpunet gang, run by torchrun (gloo, CPU).

Every process (rank r of WORLD_SIZE, as torchrun sets them):

1. all-reduces (sum) an int64 vector drawn from a generator seeded with
   SEED + r, an exact sum whatever the order;
2. trains a small float64 MLP for STEPS steps of SGD with
   DistributedDataParallel: a global batch of BATCH samples drawn from SEED,
   rank r taking rows r, r + WORLD_SIZE, ..., so the averaged gradient is
   the full batch's;
3. writes OUT/result.json: the sum's SHA-256, the whole batch's loss at
   each step (the ranks' losses averaged) and the trained parameters
   (float64, written exactly).

With --local N it is one process, no torch.distributed: the sum of the N
ranks' vectors and the same training on the whole batch, which is what the
gang's ranks must give (the sum exactly, the training up to the float64
rounding of summing the gradient in another order).
"""

import argparse
import hashlib
import json
import os
import sys
import time

import torch
import torch.nn as nn


def vector(seed, rank, n):
    g = torch.Generator().manual_seed(seed + rank)
    return torch.randint(-(1 << 40), 1 << 40, (n,), generator=g, dtype=torch.int64)


def model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)).double()


def batch(seed, size):
    g = torch.Generator().manual_seed(seed * 7919 + 1)
    x = torch.randn(size, 8, generator=g, dtype=torch.float64)
    w = torch.arange(1, 9, dtype=torch.float64) / 8
    y = torch.sin(x @ w).unsqueeze(1) + 0.1 * torch.randn(size, 1, generator=g, dtype=torch.float64)
    return x, y


def train(net, x, y, steps, lr):
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def params(net):
    return [float(v) for p in net.parameters() for v in p.detach().reshape(-1).tolist()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/out")
    ap.add_argument("--elems", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--local", type=int, default=0, help="one process standing for N ranks")
    a = ap.parse_args()
    torch.set_num_threads(1)  # the same kernels in every process
    t0 = time.time()

    if a.local:
        rank, world = 0, a.local
        total = vector(a.seed, 0, a.elems)
        for r in range(1, world):
            total += vector(a.seed, r, a.elems)
        net = model(a.seed)
        x, y = batch(a.seed, a.batch)
        losses = train(net, x, y, a.steps, a.lr)
    else:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if a.batch % world:
            sys.exit(f"--batch {a.batch} is not a multiple of WORLD_SIZE {world}")
        dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT from torchrun
        total = vector(a.seed, rank, a.elems)
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        net = DDP(model(a.seed))
        x, y = batch(a.seed, a.batch)
        losses = train(net, x[rank::world], y[rank::world], a.steps, a.lr)
        dist.all_reduce(losses, op=dist.ReduceOp.SUM)  # the whole batch's loss:
        losses /= world  # the mean of the ranks' (equal) shards' means
        net = net.module
        dist.barrier()
        dist.destroy_process_group()

    losses = losses.tolist()
    digest = hashlib.sha256(total.numpy().tobytes()).hexdigest()
    result = {"rank": rank, "world": world, "elems": a.elems, "sum_sha256": digest,
              "loss": losses, "params": params(net), "torch": torch.__version__}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f)
    print(f"torchrun-example rank={rank} world={world} sum_sha256={digest} "
          f"loss={losses[0]:.6f}->{losses[-1]:.6f} took={time.time() - t0:.2f}s", flush=True)


if __name__ == "__main__":
    main()
