"""`python -m launcher.netbench`: measure the network through torch.distributed (nccl on GPUs, gloo on CPU).

Run it under torchrun, one process per GPU (or CPU rank):
    torchrun --standalone --nproc-per-node 8 -m launcher.netbench --out netbench.json
    srun torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:PORT -m launcher.netbench
or let it start the local ranks itself: `python -m launcher.netbench --nproc-per-node 4`.

Per message size it times all_reduce, all_gather, reduce_scatter, all_to_all (equal splits, nccl-tests' alltoall)
and a send/recv ping-pong: inside each node
(the ranks of one node, all nodes at once) and across nodes (every rank) when there are several. Rank 0 prints
nccl-tests-like tables (launcher.netbench.format_tables) and writes the JSON result (--out) that the estimator
takes in place of the cluster's datasheet bandwidths (launcher.netbench.apply_network).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from launcher.netbench import Measurement, ProbeResult, format_tables, save

CPU_SIZES = (4 << 10, 64 << 10, 1 << 20, 4 << 20)
GPU_SIZES = tuple(1 << k for k in range(10, 31, 2))   # 1 KiB .. 1 GiB, x4


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m launcher.netbench", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="netbench.json", help="JSON result, written by rank 0 (default: %(default)s)")
    p.add_argument("--cluster", default="", help="cluster preset name recorded in the result (the cache key)")
    p.add_argument("--sizes", default="", help="comma-separated message sizes in bytes (default: 4 KiB-4 MiB on "
                                               "CPU, 1 KiB-1 GiB on GPU)")
    p.add_argument("--iters", type=int, default=0, help="timed iterations per size (default: 5 CPU, 20 GPU)")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations per size")
    p.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter,all_to_all,sendrecv")
    p.add_argument("--nproc-per-node", type=int, default=0,
                   help="outside torchrun: start this many local ranks (torchrun --standalone) and run on them")
    return p.parse_args(argv)


def _launch_local(args: argparse.Namespace, argv: list[str]) -> int:
    """Not under torchrun: start `--nproc-per-node` local ranks with torchrun --standalone."""
    n = args.nproc_per_node
    if n < 2:
        print("error: run under torchrun (e.g. torchrun --standalone --nproc-per-node 2 -m launcher.netbench), or "
              "give --nproc-per-node N >= 2 to start N local ranks", file=sys.stderr)
        return 2
    rest = [a for i, a in enumerate(argv) if not (a.startswith("--nproc-per-node") or
                                                 (i > 0 and argv[i - 1] == "--nproc-per-node"))]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
           "-m", "launcher.netbench", *rest]
    return subprocess.call(cmd)


class _Bench:
    """Times one op at one size on one process group (every rank of the group calls it)."""

    def __init__(self, torch, dist, device, iters: int, warmup: int) -> None:
        self.torch, self.dist, self.device, self.iters, self.warmup = torch, dist, device, iters, warmup

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _max_over(self, seconds: float, group) -> float:
        t = self.torch.tensor([seconds], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=group)
        return float(t.item())

    def collective(self, op: str, nbytes: int, group) -> float:
        torch, dist = self.torch, self.dist
        n = dist.get_world_size(group)
        count = max(n, nbytes // 4 // n * n)          # float32 elements, a multiple of n
        full = torch.ones(count, dtype=torch.float32, device=self.device)
        chunk = torch.ones(count // n, dtype=torch.float32, device=self.device)
        received = torch.empty_like(full) if op == "all_to_all" else None
        # torch 2.13 renamed the tensor forms (*_single); older releases only have *_into_tensor / *_tensor.
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        run = {"all_reduce": lambda: dist.all_reduce(full, group=group),
               "all_gather": lambda: gather(full, chunk, group=group),
               "reduce_scatter": lambda: scatter(chunk, full, group=group),
               # count/n elements to every rank (itself included): the whole buffer leaves, as nccl-tests' alltoall
               "all_to_all": lambda: dist.all_to_all_single(received, full, group=group)}[op]
        return self._timed(run, group)

    def sendrecv(self, nbytes: int, a: int, b: int, group) -> Optional[float]:
        """One-way time of a ping-pong between global ranks a and b (None on the other ranks)."""
        torch, dist = self.torch, self.dist
        buf = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=self.device)
        me = dist.get_rank()

        def run() -> None:
            if me == a:
                dist.send(buf, b)
                dist.recv(buf, b)
            elif me == b:
                dist.recv(buf, a)
                dist.send(buf, a)
        return self._timed(run, group) / 2.0

    def _timed(self, run, group) -> float:
        for _ in range(self.warmup):
            run()
        self._sync()
        self.dist.barrier(group=group)
        start = time.perf_counter()
        for _ in range(self.iters):
            run()
        self._sync()
        return self._max_over((time.perf_counter() - start) / self.iters, group)


def run_probe(args: argparse.Namespace) -> Optional[ProbeResult]:
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    nodes = world // per_node
    sizes = [int(s) for s in args.sizes.split(",") if s] or list(GPU_SIZES if cuda else CPU_SIZES)
    ops = [o for o in args.ops.split(",") if o]
    bench = _Bench(torch, dist, device, args.iters or (20 if cuda else 5), args.warmup)
    # torchrun numbers ranks node by node, so each node's ranks are a contiguous block.
    node_group, _ = dist.new_subgroups(group_size=per_node) if nodes > 1 else (dist.group.WORLD, None)
    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    found: list[Measurement] = []
    scopes = ([("intra_node", node_group, per_node)] if per_node > 1 else []) + (
        [("inter_node", dist.group.WORLD, world)] if nodes > 1 else [])
    for scope, group, n in scopes:
        for op in ops:
            for size in sizes:
                if op == "sendrecv":
                    peer = 1 if scope == "intra_node" else per_node      # rank 0 <-> a rank on the next node
                    t = bench.sendrecv(size, 0, peer, dist.group.WORLD)
                    found.append(Measurement(op, scope, 2, max(4, size // 4 * 4), t))
                else:
                    t = bench.collective(op, size, group)
                    count = max(n, size // 4 // n * n)
                    found.append(Measurement(op, scope, n, count * 4, t))
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return None
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    return ProbeResult(args.cluster or ("local-cpu" if not cuda else name), nodes, per_node, "nccl" if cuda else "gloo",
                       name, tuple(dict.fromkeys(hosts)), tuple(found), time.time(), torch.__version__)


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if "RANK" not in os.environ:
        return _launch_local(args, argv)
    result = run_probe(args)
    if result is not None:
        print(format_tables(result), flush=True)
        path = save(result, Path(args.out))
        print(f"# written: {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
