"""`python -m torch.distributed.run --nproc-per-node W -m launcher.workload ARGS`: parse, validate, train.

Invalid arguments exit with status 2 and ONE line naming the argument (before any process group exists, so
no rank hangs waiting for a peer that already quit).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import NoReturn

STARTED_S = time.perf_counter()  # before torch is imported: "init done in X s" includes the imports


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints usage + message; the sweep wants one line
        fail(message)


def fail(message: str) -> NoReturn:
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"parasweep workload: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m launcher.workload", description=__doc__)
    model = p.add_argument_group("model")
    model.add_argument("--layers", type=int, default=4)
    model.add_argument("--hidden", type=int, default=256)
    model.add_argument("--heads", type=int, default=4)
    model.add_argument("--kv-heads", type=int, default=None, help="GQA key/value heads (default: --heads)")
    model.add_argument("--ffn-hidden", type=int, default=None, help="default 4 * hidden")
    model.add_argument("--swiglu", action="store_true")
    model.add_argument("--seq-len", type=int, default=128)
    model.add_argument("--vocab", type=int, default=1024)
    model.add_argument("--untie-embeddings", action="store_true", help="separate output layer (default: tied)")
    model.add_argument("--norm", choices=("layernorm", "rmsnorm"), default="layernorm")
    model.add_argument("--attention", choices=("sdpa", "math"), default="sdpa",
                       help="sdpa: fused kernel; math: explicit softmax(QK^T)V that stores the s x s scores")
    experts = p.add_argument_group("mixture of experts (every layer's FFN; launcher/workload/moe.py)")
    experts.add_argument("--num-experts", type=int, default=None, help="routed experts per layer (default: dense)")
    experts.add_argument("--moe-topk", type=int, default=2, help="experts per token")
    experts.add_argument("--moe-ffn-hidden", type=int, default=None, help="each expert's FFN size (default: "
                                                                          "--ffn-hidden)")
    experts.add_argument("--shared-expert-ffn-hidden", type=int, default=0, help="shared expert FFN size (0: none)")
    experts.add_argument("--moe-aux-loss-coeff", type=float, default=0.0, help="load-balancing loss coefficient")
    lay = p.add_argument_group("layout")
    for name in ("tp", "pp", "dp", "vpp", "mbs"):
        lay.add_argument(f"--{name}", type=int, default=1)
    lay.add_argument("--gbs", type=int, default=8)
    lay.add_argument("--ep", type=int, default=1, help="expert parallelism (ranks splitting the routed experts)")
    lay.add_argument("--etp", type=int, default=None, help="expert tensor parallelism (default: --tp, as Megatron)")
    lay.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    lay.add_argument("--recompute-every", type=int, default=1, metavar="K",
                     help="with --recompute full: checkpoint 1/K of each model chunk's layers, the first "
                          "layers/(pp*vpp*K) (Megatron's block method); default 1: every layer")
    lay.add_argument("--sequence-parallel", action="store_true")
    lay.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), default=0)
    lay.add_argument("--distributed-optimizer", action="store_true", help="shard optimizer state (= ZeRO-1)")
    run = p.add_argument_group("run")
    run.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    run.add_argument("--warmup-iters", type=int, default=2)
    run.add_argument("--measure-iters", type=int, default=4)
    run.add_argument("--seed", type=int, default=1234)
    run.add_argument("--lr", type=float, default=1e-3)
    run.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    run.add_argument("--mem-limit-mb", type=int, default=0, help="per-rank training-memory cap (0: none)")
    run.add_argument("--peak-tflops", type=float, default=0.0, help="per-device peak, for MFU (0: no MFU)")
    test = p.add_argument_group("fault injection (for testing the sweep's failure handling)")
    test.add_argument("--fault", choices=("none", "hang", "garble", "crash", "impossible", "zero-step"),
                      action="append", default=None,
                      help="hang: stop making progress after the warm-up; garble: print a truncated result line; "
                           "crash: raise after the warm-up; impossible: report 1e30 tokens/s, negative memory and "
                           "NaN MFU; zero-step: report zero and negative step times. Repeatable: the n-th --fault "
                           "goes with the n-th --fault-if")
    test.add_argument("--fault-if", action="append", default=None, metavar="ARG=VALUE",
                      help="inject only when this argument has this value, e.g. mbs=2 (one trial of a sweep)")
    return p


def validate(a: argparse.Namespace, world_size: int) -> str | None:
    """The first problem with the arguments, as one message naming the argument; None when they are usable."""
    for condition in a.fault_if or ():
        key, sep, _ = condition.partition("=")
        if not sep or not hasattr(a, key.replace("-", "_")):
            return f"--fault-if {condition!r} must be ARG=VALUE with ARG a workload argument (e.g. mbs=2)"
    if len(a.fault_if or ()) > len(a.fault or ()):
        return f"--fault-if is given {len(a.fault_if)} times but --fault {len(a.fault or ())}: pair each with a fault"
    positive = ("layers", "hidden", "heads", "seq_len", "vocab", "tp", "pp", "dp", "vpp", "mbs", "gbs",
                "measure_iters", "recompute_every")
    for name in positive:
        if getattr(a, name) < 1:
            return f"--{name.replace('_', '-')} {getattr(a, name)} must be >= 1"
    for name in ("kv_heads", "ffn_hidden"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            return f"--{name.replace('_', '-')} {getattr(a, name)} must be >= 1"
    for name in ("warmup_iters", "mem_limit_mb", "peak_tflops"):
        if getattr(a, name) < 0:
            return f"--{name.replace('_', '-')} {getattr(a, name)} must be >= 0"
    kv = a.kv_heads or a.heads
    ffn = a.ffn_hidden or 4 * a.hidden
    micro = a.gbs // (a.mbs * a.dp)
    checks = [
        (a.tp * a.pp * a.dp != world_size,
         f"--tp {a.tp} x --pp {a.pp} x --dp {a.dp} = {a.tp * a.pp * a.dp} must equal WORLD_SIZE {world_size}"),
        (a.hidden % a.heads, f"--hidden {a.hidden} must be divisible by --heads {a.heads}"),
        (a.heads % kv, f"--heads {a.heads} must be divisible by --kv-heads {kv}"),
        (kv % a.tp, f"--kv-heads {kv} (and --heads) must be divisible by --tp {a.tp}"),
        (ffn % a.tp, f"--ffn-hidden {ffn} must be divisible by --tp {a.tp}"),
        (a.vocab % a.tp, f"--vocab {a.vocab} must be divisible by --tp {a.tp} (vocabulary-parallel output)"),
        (a.sequence_parallel and a.seq_len % a.tp, f"--seq-len {a.seq_len} must be divisible by --tp {a.tp}"),
        (a.gbs % (a.mbs * a.dp), f"--gbs {a.gbs} must be a multiple of --mbs {a.mbs} x --dp {a.dp}"),
        (a.vpp > 1 and a.pp == 1, f"--vpp {a.vpp} needs --pp > 1"),
        (a.layers % (a.pp * a.vpp), f"--layers {a.layers} must be divisible by --pp {a.pp} x --vpp {a.vpp}"),
        (a.pp > 1 and micro < a.pp,
         f"--gbs {a.gbs} gives {micro} microbatches per pipeline, fewer than --pp {a.pp} (1F1B needs >= pp)"),
        (a.vpp > 1 and micro % a.pp,
         f"--gbs {a.gbs} gives {micro} microbatches, not a multiple of --pp {a.pp} (interleaved schedule)"),
        (a.recompute_every > 1 and a.recompute != "full",
         f"--recompute-every {a.recompute_every} needs --recompute full (it is {a.recompute})"),
        ((a.layers // (a.pp * a.vpp)) % a.recompute_every,
         f"--recompute-every {a.recompute_every} must divide the {a.layers // (a.pp * a.vpp)} layers of each model "
         f"chunk (--layers / (--pp x --vpp))"),
    ]
    return next((message for bad, message in checks if bad), None) or validate_moe(a)


def validate_moe(a: argparse.Namespace) -> str | None:
    """The MoE arguments (Megatron-core's rules for the expert mesh, plus what this workload implements)."""
    if a.num_experts is None:
        for name, dense in (("ep", 1), ("etp", None), ("moe_ffn_hidden", None), ("shared_expert_ffn_hidden", 0),
                            ("moe_aux_loss_coeff", 0.0)):
            if getattr(a, name) != dense:
                flag = f"--{name.replace('_', '-')}"
                return f"{flag} {getattr(a, name)} needs --num-experts (it configures the MoE layers)"
        return None
    etp = a.etp if a.etp is not None else a.tp
    ffn = a.moe_ffn_hidden or a.ffn_hidden or 4 * a.hidden
    for name in ("num_experts", "moe_topk", "ep", "etp", "moe_ffn_hidden"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            return f"--{name.replace('_', '-')} {getattr(a, name)} must be >= 1"
    for name in ("shared_expert_ffn_hidden", "moe_aux_loss_coeff"):
        if getattr(a, name) < 0:
            return f"--{name.replace('_', '-')} {getattr(a, name)} must be >= 0"
    checks = [
        (a.moe_topk > a.num_experts, f"--moe-topk {a.moe_topk} must be <= --num-experts {a.num_experts}"),
        (a.num_experts % a.ep, f"--num-experts {a.num_experts} must be divisible by --ep {a.ep}"),
        ((a.tp * a.dp) % (a.ep * etp),
         f"--ep {a.ep} x --etp {etp} = {a.ep * etp} must divide --tp {a.tp} x --dp {a.dp} = {a.tp * a.dp} (the "
         f"expert mesh is made of each pipeline stage's tp x dp ranks; --etp defaults to --tp)"),
        (ffn % etp, f"--moe-ffn-hidden {ffn} must be divisible by --etp {etp}"),
        (a.shared_expert_ffn_hidden % a.tp,
         f"--shared-expert-ffn-hidden {a.shared_expert_ffn_hidden} must be divisible by --tp {a.tp}"),
        (a.tp > 1 and a.seq_len % a.tp,
         f"--seq-len {a.seq_len} must be divisible by --tp {a.tp} with --num-experts (each tp rank dispatches its "
         f"sequence shard)"),
        (a.zero_stage >= 2, f"--zero-stage {a.zero_stage} is not supported with --num-experts (FSDP would shard "
                            f"experts over dp ranks that hold different experts); use --zero-stage 0 or 1 / "
                            f"--distributed-optimizer"),
    ]
    return next((message for bad, message in checks if bad), None)


def _few_malloc_arenas() -> None:
    """glibc reserves 64 MiB of address space per malloc arena, up to 8 per core, as threads contend: under the
    CPU stand-in's address-space cap (launcher/workload/memory.py) those reservations, not training memory, hit the
    limit first (a pp=2 trial of the tiny sweep peaking at 50 MB ran out of its 476 MiB in 2 of 3 runs). Two arenas
    keep the cap on real allocations. mallopt(M_ARENA_MAX) works at run time, before the threads start."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to limit
        ctypes.CDLL(None).mallopt(-8, 2)  # M_ARENA_MAX = -8 (malloc.h)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = validate(args, int(os.environ.get("WORLD_SIZE", "1")))
    if problem:
        fail(problem)
    if args.mem_limit_mb > 0:
        _few_malloc_arenas()
    from launcher.workload.train import run  # torch is imported only once the arguments are known good

    run(args, STARTED_S)
    return 0


def exit_now(code: int) -> None:
    """Leave without interpreter finalisation, once the result is printed and the process groups are destroyed.

    Why: the c10d/gloo C++ objects that DTensor, the device mesh and the pipeline schedule keep alive are torn down
    only at finalisation, racing the interpreter's own teardown and C++ static destructors; now and then a worker
    thread is still joinable there and the rank dies with "terminate called without an active exception" (SIGABRT)
    after a successful run (seen once in the test suite with tp=2). Nothing is left to do after the result line, so
    flush the streams and end the process directly (pytorch/pytorch#179291 describes the same finalisation crash)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
