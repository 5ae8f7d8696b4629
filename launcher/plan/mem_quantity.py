"""What a published peak-memory figure measures, and the estimator's prediction of that quantity.

The estimator predicts the tensors a rank holds at its peak (launcher.plan.memory: model states, activations,
logits, temporaries: what torch.cuda.max_memory_allocated counts) and derives the other quantities a source may
quote (PyTorch docs, "CUDA semantics / Memory management": the caching allocator keeps freed blocks for reuse, so
"unused memory managed by the allocator will still show as if used in nvidia-smi"; memory_allocated /
max_memory_allocated count the memory occupied by tensors, memory_reserved / max_memory_reserved all the memory the
caching allocator manages):

    allocated = states + activations + logits + gathered + temporaries     (Constants.transient_share)
    reserved  = allocated + fragmentation                                   (Constants.fragmentation_share x the
                short-lived memory: blocks the allocator keeps split or cached at the peak)
    device    = reserved + context                                          (Constants.gpu_context_gb: the CUDA
                context, ~0.5-0.8 GB on its own - "the first CUDA call creates the CUDA context", 723 MiB for one
                tensor, discuss.pytorch.org t/73021, ~700+ MB t/81330 -, plus cuBLAS workspaces and NCCL's
                per-communicator buffers, outside the caching allocator: what nvidia-smi / NVML show as used)

Worked example (parasweep's own H100 sweep, tests/data/published/parasweep_h100_own.csv): gpt-1.7b, mbs 2, no
recompute, torch workload: 41.6 GB max_memory_allocated measured; the prior constants give allocated 40.6,
reserved = 40.6 + 0.1 x 10.3 GB of short-lived memory = 41.6, device = 41.6 + 1.5 = 43.1.

`QUANTITIES` is the vocabulary a corpus row's `mem_how` starts with ("<quantity>: how it was read"): one of the
three above, 'allocated_or_reserved' for a framework report that prints both and a table that does not say which
(Megatron's report_memory, nanotron's "Peak allocated ... Peak reserved" log line), 'unknown' when nothing is said
(the interval then spans allocated to device). A prediction is compared with a measurement through the interval:
inside it the error is 0, outside the distance to its nearer end.
"""

from __future__ import annotations

from typing import Any

QUANTITIES = {
    "allocated": ("allocated", "allocated"),
    "reserved": ("reserved", "reserved"),
    "device": ("device", "device"),
    "allocated_or_reserved": ("allocated", "reserved"),
    "unknown": ("allocated", "device"),
}
"""Quantity -> (lower, upper) bound of what the figure can be, among allocated <= reserved <= device."""


class MemQuantityError(ValueError):
    """A mem_how text that does not start with a quantity of the vocabulary."""


def parse_mem_how(text: str) -> str:
    """The quantity a `mem_how` cell names ('<quantity>: ...'); '' for an empty cell (no memory figure)."""
    t = text.strip()
    if not t:
        return ""
    head = t.split(":", 1)[0].strip().lower()
    if head not in QUANTITIES:
        raise MemQuantityError(f"mem_how {text!r}: start it with one of {', '.join(QUANTITIES)} and a colon "
                               "(what the peak counts), e.g. 'allocated: torch.cuda.max_memory_allocated, GiB'")
    return head


def bounds(quantity: str, allocated: Any, reserved: Any, device: Any) -> tuple[Any, Any]:
    """(lower, upper) prediction of what a figure of `quantity` measures (floats, or numpy arrays)."""
    values = {"allocated": allocated, "reserved": reserved, "device": device}
    low, high = QUANTITIES[quantity]
    return values[low], values[high]


def comparable(measured: float, low: float, high: float) -> float:
    """The point of [low, high] nearest to the measurement: the prediction the measurement is judged against."""
    return min(max(measured, low), high)
