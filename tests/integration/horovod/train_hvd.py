#!/usr/bin/env python3
"""An ordinary Horovod PyTorch training job, knowing nothing of SlimReduce.

A small MLP learns a fixed random "teacher" classifier from synthetic data (fixed seeds), on
every rank with its own shard, through hvd.DistributedOptimizer; parameters start from rank 0
(hvd.broadcast_parameters); the training loss is averaged across ranks with hvd.allreduce.
At the end rank 0 writes a JSON summary (--out): the final loss on a fixed evaluation set,
time per step, and a checksum of every rank's parameters gathered with hvd.allgather, so a
checker can tell whether all ranks ended with identical parameters.

The run is the same in every configuration; only the environment (LD_PRELOAD,
SLIMREDUCE_COMPRESSOR, HOROVOD_*) changes.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import horovod.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=16, help="per rank")
    p.add_argument("--in-dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.1, help="decays linearly to 0")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--samples", type=int, default=8192, help="training samples per rank")
    p.add_argument("--groups", type=int, default=1,
                   help="hvd.DistributedOptimizer(groups=N): N > 0 fixed fusion groups (one "
                        "fused buffer per step with 1); 0: Horovod's time-driven fusion")
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--model", choices=("mlp", "stack"), default="mlp",
                   help="mlp: four layers of different shapes; stack: a transformer-like stack of "
                        "identical blocks (repeated layer shapes)")
    p.add_argument("--blocks", type=int, default=6, help="stack: how many blocks")
    p.add_argument("--out", default="", help="rank 0 writes its JSON summary here")
    return p.parse_args()


class Teacher(nn.Module):
    """A fixed random network; labels are drawn from softmax(SHARPNESS * its logits).

    Learnable, with a floor: the best possible loss is the labels' entropy (about 0.96 nats),
    which both the exact and the compressed runs approach, so their final losses compare.
    """

    def __init__(self, in_dim, classes):
        super().__init__()
        self.l1 = nn.Linear(in_dim, 32)
        self.l2 = nn.Linear(32, classes)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))


class Student(nn.Module):
    def __init__(self, in_dim, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        return self.out(x)


class Block(nn.Module):
    """A transformer block's parameter shapes without attention: norm, widen, narrow."""

    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(F.relu(self.up(self.norm(x))))


class Stack(nn.Module):
    """Identical blocks between an input and an output layer: many tensors of equal shapes."""

    def __init__(self, in_dim, width, classes, blocks):
        super().__init__()
        self.inp = nn.Linear(in_dim, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.out = nn.Linear(width, classes)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


SHARPNESS = 10.0


def make_data(teacher, n, in_dim, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, in_dim, generator=g)
    with torch.no_grad():
        probs = torch.softmax(SHARPNESS * teacher(x), dim=1)
    y = torch.multinomial(probs, 1, generator=g).squeeze(1)
    return x, y


def param_digest(model):
    """First 8 bytes of SHA-1 over every parameter's bytes, as an int64: equal iff bit-identical."""
    h = hashlib.sha1()
    for _, p in sorted(model.named_parameters()):
        h.update(p.detach().contiguous().numpy().tobytes())
    return int.from_bytes(h.digest()[:8], "little", signed=True)


def main():
    args = parse_args()
    torch.set_num_threads(1)  # 4 ranks share 2 cores
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    torch.manual_seed(1)
    teacher = Teacher(args.in_dim, args.classes)
    x_train, y_train = make_data(teacher, args.samples, args.in_dim, seed=1000 + rank)
    x_eval, y_eval = make_data(teacher, 2048, args.in_dim, seed=999)

    torch.manual_seed(100 + rank)  # different on each rank: the broadcast must make them equal
    if args.model == "stack":
        model = Stack(args.in_dim, args.hidden // 2, args.classes, args.blocks)
    else:
        model = Student(args.in_dim, args.hidden, args.classes)
    n_params = sum(p.numel() for p in model.parameters())

    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   groups=args.groups if args.groups > 0 else None)
    # Linear decay to 0: the last steps are small, so the final loss is a stable measure.
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / args.steps)

    losses = []
    step_times = []
    g = torch.Generator().manual_seed(7 + rank)
    for step in range(args.steps):
        t0 = time.perf_counter()
        idx = torch.randint(0, args.samples, (args.batch,), generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        loss.backward()
        opt.step()
        sched.step()
        step_times.append(time.perf_counter() - t0)
        if step % args.log_every == 0 or step == args.steps - 1:
            avg = hvd.allreduce(loss.detach(), name="train_loss", op=hvd.Average).item()
            losses.append((step, avg))
            if rank == 0:
                print(f"step {step:4d}  train loss {avg:.4f}", flush=True)

    model.eval()
    with torch.no_grad():
        eval_loss = F.cross_entropy(model(x_eval), y_eval)
        eval_acc = (model(x_eval).argmax(1) == y_eval).float().mean()
    eval_loss_avg = hvd.allreduce(eval_loss, name="eval_loss", op=hvd.Average).item()
    eval_acc_avg = hvd.allreduce(eval_acc, name="eval_acc", op=hvd.Average).item()

    digests = hvd.allgather(torch.tensor([param_digest(model)], dtype=torch.int64), name="digest")
    digests = [int(d) for d in digests.tolist()]

    warm = step_times[5:] if len(step_times) > 10 else step_times
    summary = {
        "world_size": size,
        "steps": args.steps,
        "parameters": n_params,
        "gradient_bytes_per_step": 4 * n_params,
        "train_loss": losses,
        "final_train_loss": losses[-1][1],
        "final_eval_loss": eval_loss_avg,
        "final_eval_accuracy": eval_acc_avg,
        "time_per_step_s": sum(warm) / len(warm),
        "param_digests": digests,
        "params_identical": len(set(digests)) == 1,
        "env": {k: v for k, v in os.environ.items()
                if k.startswith(("SLIMREDUCE_", "HOROVOD_")) or k == "LD_PRELOAD"},
    }
    if rank == 0:
        print(f"final eval loss {eval_loss_avg:.5f}  accuracy {eval_acc_avg:.4f}  "
              f"{summary['time_per_step_s'] * 1e3:.1f} ms/step  params identical: "
              f"{summary['params_identical']}", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(summary, f, indent=1)
    hvd.shutdown()


if __name__ == "__main__":
    sys.exit(main())
