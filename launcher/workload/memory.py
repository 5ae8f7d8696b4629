"""Per-rank training memory: a real capacity limit, and the peak actually used.

"Training memory" is everything allocated after the process group and mesh are up: parameters, gradients,
optimizer state, activations, communication buffers. On CPU there is no allocator statistic, so it is measured
as peak RSS (VmHWM) minus file-backed pages minus the anonymous RSS at that point, and capped with an
address-space limit (RLIMIT_AS) at VmSize + limit: going over fails inside torch with the real
`DefaultCPUAllocator: can't allocate memory`. RLIMIT_AS counts virtual memory, so the cap binds a little before
the measured peak reaches it. On GPU: torch.cuda.max_memory_allocated, capped with
set_per_process_memory_fraction.
"""

from __future__ import annotations

import resource

import torch

GB = 1e9  # decimal gigabytes, like the planner (ClusterConfig.gpu_mem_gb) and GPU datasheets
MIB = 2**20


def proc_status_bytes(path: str = "/proc/self/status") -> dict[str, int]:
    """VmSize, VmRSS, VmHWM, RssFile, ... of this process in bytes (Linux reports them in kB)."""
    values = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                values[key] = int(parts[0]) * 1024
    return values


def _reset_peak_rss() -> None:
    """Make VmHWM restart from the current RSS (Linux >= 4.0: write 5 to clear_refs), so import/init peaks
    do not count as training memory."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class MemoryMeter:
    """Take the baseline (and apply the limit) at construction; `peak_bytes()` later."""

    def __init__(self, device: torch.device, limit_mb: int) -> None:
        self.device = device
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            self.baseline_bytes = torch.cuda.memory_allocated(device)
            if limit_mb > 0:
                total = torch.cuda.get_device_properties(device).total_memory
                torch.cuda.set_per_process_memory_fraction(min(1.0, limit_mb * MIB / total), device)
            return
        _warm_up()
        _reset_peak_rss()
        status = proc_status_bytes()
        self.baseline_bytes = status["VmRSS"] - status["RssFile"]
        if limit_mb > 0:
            cap = status["VmSize"] + limit_mb * MIB
            resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))

    def peak_bytes(self) -> int:
        """Peak training memory of this rank since construction."""
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self.baseline_bytes
        # Peak RSS minus file-backed pages (library code touched for the first time by a new kernel is not
        # training memory; file pages only grow unless evicted, so the current RssFile bounds the peak's).
        status = proc_status_bytes()
        return max(0, status["VmHWM"] - status["RssFile"] - self.baseline_bytes)

    def peak_reserved_bytes(self) -> int | None:
        """GPU: peak bytes held by the caching allocator (what the device actually lost); CPU: None."""
        return torch.cuda.max_memory_reserved(self.device) if self.device.type == "cuda" else None


def _warm_up() -> None:
    """Pay one-off costs before the baseline and the cap: start the intra-op thread pool (a thread that cannot
    get its stack under the cap fails with a pthread error, not the allocator error the sweep classifies) and
    trigger the lazy imports of the optimizer (about 65 MiB of Python modules, not training memory)."""
    a = torch.nn.Parameter(torch.ones(256, 256))
    torch.nn.functional.cross_entropy(a @ a, torch.zeros(256, dtype=torch.long)).backward()
    torch.optim.AdamW([a]).step()
