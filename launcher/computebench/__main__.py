"""`python -m launcher.computebench`: GEMM TFLOP/s at given shapes and one transformer layer's forward + backward.

One process on one device (the first GPU, else the CPU), the job side of the compute probe: torch, the stdlib and
the embedded workload's transformer block only. Examples:
    python -m launcher.computebench --gemm "qkv tp1=4096x12288x4096" --gemm "fc2 tp1=4096x4096x11008" \\
        --layer hidden=4096,heads=32,kv_heads=32,ffn_hidden=11008,seq_len=4096,mbs=1,swiglu=1,norm=rmsnorm \\
        --precision bf16 --out computebench.json
Each GEMM (m x k) @ (k x n) runs a few untimed calls, then `--repeats` timed repeats of enough calls to fill its
share of `--budget-s` (CUDA events on a GPU, the wall clock on the CPU); its time is the median repeat's per call.
The layer (launcher.workload.model.Block at tp=1) runs forward + backward the same way. The JSON result
(launcher.computebench.result) is what the planner reads (launcher.computebench.view.apply_compute).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import torch

from launcher.computebench.result import ComputeResult, GemmMeasurement, LayerMeasurement, dumps
from launcher.workload.model import Block, GPTConfig

DEFAULT_GEMMS = {"cpu": ((256, 256, 256), (512, 512, 512), (512, 2048, 512)),
                 "cuda": ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 16384, 4096))}
DEFAULT_LAYER = {"cpu": "hidden=128,heads=4,kv_heads=4,ffn_hidden=512,seq_len=128,mbs=1,swiglu=0,norm=layernorm",
                 "cuda": "hidden=4096,heads=32,kv_heads=32,ffn_hidden=16384,seq_len=2048,mbs=1,swiglu=0,"
                         "norm=layernorm"}
MIN_REPEATS = 3
HARD_LIMIT = 2.0
"""Past this many times the budget the probe starts no more shapes (loaded shared cores: see run_probe)."""
MIN_SHARE_S = 0.05
"""A shape left less than this of the budget is timed once (the probe is over its time box: shared cores)."""
LAYER_SHARE = 0.3
"""Share of the time budget for the layer (the rest is split between the GEMMs)."""


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m launcher.computebench", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--out", default="computebench.json", help="JSON result (default: %(default)s)")
    p.add_argument("--cluster", default="", help="cluster preset name recorded in the result (the cache key)")
    p.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp16", "fp32"),
                   help="GEMM/layer dtype (auto: bf16 on a GPU, fp32 on the CPU)")
    p.add_argument("--gemm", action="append", default=[], metavar="NAME=MxNxK",
                   help="a GEMM (m x k) @ (k x n) to time, repeatable (default: a few square-ish shapes)")
    p.add_argument("--layer", default="", metavar="hidden=H,heads=A,...",
                   help="the layer to time: hidden, heads, kv_heads, ffn_hidden, seq_len, mbs, swiglu (0/1), norm "
                        "(layernorm/rmsnorm); 'none' for no layer")
    p.add_argument("--repeats", type=int, default=0, help="timed repeats per shape (default: 5 CPU, 10 GPU)")
    p.add_argument("--warmup", type=int, default=0, help="untimed calls per shape (default: 1 CPU, 3 GPU)")
    p.add_argument("--budget-s", type=float, default=0.0,
                   help="time to spend timing, all shapes together (default: 10 s CPU, 15 s GPU)")
    return p.parse_args(argv)


def parse_gemm(text: str) -> tuple[str, int, int, int]:
    """'qkv tp2=4096x6144x4096' -> ('qkv tp2', 4096, 6144, 4096); a bare 'MxNxK' is named after itself."""
    name, _, dims = text.rpartition("=")
    try:
        m, n, k = (int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise SystemExit(f"error: --gemm {text!r}: expected NAME=MxNxK with three integers, "
                         "e.g. qkv=4096x12288x4096") from None
    if min(m, n, k) < 1:
        raise SystemExit(f"error: --gemm {text!r}: every dimension must be >= 1")
    return name or dims, m, n, k


def parse_layer(text: str) -> dict[str, Any]:
    keys: dict[str, Callable[[str], Any]] = {
        "hidden": int, "heads": int, "kv_heads": int, "ffn_hidden": int, "seq_len": int, "mbs": int,
            "swiglu": lambda v: bool(int(v)), "norm": str}
    shape: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key not in keys:
            raise SystemExit(f"error: --layer {key!r}: not a layer field; valid: {', '.join(keys)}")
        shape[key] = keys[key](value)
    missing = [k for k in keys if k not in shape]
    if missing:
        raise SystemExit(f"error: --layer lacks {', '.join(missing)} (give all of {', '.join(keys)})")
    return shape


class Timer:
    """Median per-call time of a callable: warm-up calls, then repeats of `inner` calls sized to fill a budget."""

    def __init__(self, device: Any, repeats: int, warmup: int) -> None:
        self.device, self.repeats, self.warmup = device, repeats, warmup
        self.cuda = device.type == "cuda"

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _once(self, run: Callable[[], object], calls: int) -> float:
        if self.cuda:   # events: the GPU's own time, not the launch queue's
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                run()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3 / calls
        t0 = time.perf_counter()
        for _ in range(calls):
            run()
        return (time.perf_counter() - t0) / calls

    def median_s(self, run: Callable[[], object], budget_s: float) -> float:
        """Median per-call time over up to `repeats` repeats, spending about `budget_s` (the wall clock decides:
        on shared cores a call can take far longer than its first one). MIN_REPEATS repeats at least while the
        budget lasts; with none left (the probe is over its time box) one warm-up and one timed call."""
        started = time.perf_counter()
        for _ in range(self.warmup if budget_s > 0 else 1):
            run()
        self._sync()
        first = self._once(run, 1)
        if budget_s <= 0:
            return first
        calls = max(1, int(budget_s / self.repeats / max(first, 1e-9)))
        times: list[float] = []
        while len(times) < self.repeats and (len(times) < MIN_REPEATS
                                             or time.perf_counter() - started < budget_s):
            times.append(self._once(run, calls))
        return statistics.median(times)


def time_gemm(timer: Timer, dtype: Any, m: int, n: int, k: int, budget_s: float) -> float:
    a = torch.randn(m, k, device=timer.device, dtype=dtype)
    b = torch.randn(k, n, device=timer.device, dtype=dtype)
    c = torch.empty(m, n, device=timer.device, dtype=dtype)
    return timer.median_s(lambda: torch.matmul(a, b, out=c), budget_s)


def layer_flops(shape: dict[str, Any]) -> float:
    """Model FLOPs of one layer's forward + backward (launcher.computebench.result's convention)."""
    h, s, b, f = shape["hidden"], shape["seq_len"], shape["mbs"], shape["ffn_hidden"]
    qkv = h + 2 * shape["kv_heads"] * (h // shape["heads"])
    weights = qkv + h + (3 if shape["swiglu"] else 2) * f
    forward = 2.0 * b * s * h * weights + 4.0 * b * s * s * h
    return 3.0 * forward


def time_layer(timer: Timer, dtype: Any, shape: dict[str, Any], budget_s: float) -> float:
    cfg = GPTConfig(layers=1, hidden=shape["hidden"], heads=shape["heads"], kv_heads=shape["kv_heads"],
                    ffn_hidden=shape["ffn_hidden"], seq_len=shape["seq_len"], vocab=1, swiglu=shape["swiglu"],
                    norm=shape["norm"])
    block = Block(cfg).to(device=timer.device, dtype=dtype)
    x = torch.randn(shape["mbs"], shape["seq_len"], shape["hidden"], device=timer.device, dtype=dtype,
                    requires_grad=True)
    grad = torch.randn_like(x)

    def step() -> None:
        x.grad = None
        block.zero_grad(set_to_none=True)
        block(x).backward(grad)
    return timer.median_s(step, budget_s)


def run_probe(args: argparse.Namespace) -> ComputeResult:
    started = time.perf_counter()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    kind = "cuda" if cuda else "cpu"
    precision = args.precision if args.precision != "auto" else ("bf16" if cuda else "fp32")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[precision]
    gemms = [parse_gemm(g) for g in args.gemm] or [(f"{m}x{n}x{k}", m, n, k) for m, n, k in DEFAULT_GEMMS[kind]]
    layer_text = args.layer or DEFAULT_LAYER[kind]
    shape = None if layer_text == "none" else parse_layer(layer_text)
    budget_s = args.budget_s or (15.0 if cuda else 10.0)
    timer = Timer(device, args.repeats or (10 if cuda else 5), args.warmup or (3 if cuda else 1))
    # The GEMMs share what is left of their part of the budget: a shape that overran (shared cores) shortens the
    # next ones' repeats. Past HARD_LIMIT x the budget nothing more is started (listed as skipped), and the shapes
    # run in a fixed shuffled order, so that a probe cut short still spans the plan's tp values and batch sizes.
    gemm_end = started + budget_s * (1.0 - LAYER_SHARE if shape else 1.0)
    hard_end = started + HARD_LIMIT * budget_s
    order = list(range(len(gemms)))
    random.Random(0).shuffle(order)
    measured: dict[int, GemmMeasurement] = {}
    for done, i in enumerate(order):
        now = time.perf_counter()
        if measured and now > hard_end:
            break
        name, m, n, k = gemms[i]
        share_s = max(0.0, gemm_end - now) / (len(gemms) - done)
        share_s = share_s if share_s > MIN_SHARE_S else 0.0
        measured[i] = GemmMeasurement(name, m, n, k, time_gemm(timer, dtype, m, n, k, share_s))
    skipped = [gemms[i][0] for i in order if i not in measured]
    layer = None
    if shape is not None and time.perf_counter() <= hard_end:
        layer_s = started + budget_s - time.perf_counter()
        layer_s = layer_s if layer_s > MIN_SHARE_S else 0.0
        layer = LayerMeasurement(shape, time_layer(timer, dtype, shape, layer_s), layer_flops(shape))
    elif shape is not None:
        skipped.append("layer")
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    return ComputeResult(args.cluster or ("local-cpu" if not cuda else name), name, precision, torch.__version__,
                         tuple(measured[i] for i in sorted(measured)), layer, time.time(),
                         time.perf_counter() - started, tuple(skipped))


def format_table(result: ComputeResult) -> str:
    lines = [f"# parasweep computebench: {result.precision} on {result.device} (torch {result.torch_version}), "
             f"{result.wall_s:.1f} s", f"# {'gemm':<16} {'m':>7} {'n':>7} {'k':>7} {'time(us)':>11} {'TFLOP/s':>9}"]
    for g in result.gemms:
        lines.append(f"  {g.name:<16} {g.m:>7} {g.n:>7} {g.k:>7} {g.time_s * 1e6:>11.1f} {g.tflops:>9.3f}")
    if result.layer:
        lay = result.layer
        lines.append(f"# layer fwd+bwd {lay.shape}: {lay.fwd_bwd_s * 1e3:.2f} ms, {lay.tflops:.3f} model TFLOP/s")
    if result.skipped:
        lines.append(f"# not measured (over {HARD_LIMIT:g} x the time budget): {', '.join(result.skipped)}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    result = run_probe(args)
    print(format_table(result), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(dumps(result))
    tmp.replace(out)   # atomic: a reader never sees half a file
    print(f"# written: {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
