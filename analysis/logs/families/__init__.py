"""Failure families, each a table written from the family's source (the software that prints the text), not from
the logs it was tested on.

A row is a needle (a plain substring, found with str.find, which runs in C) and, where the needle alone is too
broad, a shape: a regular expression the text around the needle must match. A shape is how a line this project
has never seen still maps to its family: an Xid code missing from the catalogue whose line names ECC or NVLink,
an `NCCL WARN` line in the `Call to X failed : <errno text>` form, an `AssertionError` whose message relates a
parallel degree to a size. Every row carries the source its wording comes from and an example written in that
shape (tests/test_families.py classifies each example as the row's kind).

| module        | kind(s)                                   | sources (cited per table)                              |
|---------------|-------------------------------------------|--------------------------------------------------------|
| hardware      | node_failure                              | NVIDIA Xid catalogue, CUDA runtime errors, NVML, NVRM, |
|               |                                           | Linux PCIe AER, DCGM diagnostics                        |
| memory        | oom (host)                                | Linux OOM killer, cgroups, Kubernetes, Ray OOM docs     |
| config        | config_error                              | argparse, Megatron/DeepSpeed/HF argument checks, Hydra  |
| network       | comm_error                                | NCCL (ncclGetErrorString, WARN/INFO traces), libibverbs |
|               |                                           | (ibv_wc_status_str), UCX (ucs_status_string),           |
|               |                                           | aws-ofi-nccl/libfabric (EFA), Gloo, torch c10d          |
| orchestrator  | node_failure, preempted, cancelled,       | torchrun elastic agent, Ray (gcs/raylet), Kubernetes    |
|               | time_limit                                | (kubelet, scheduler, Job), AWS/GCP/Azure spot notices   |
| divergence    | diverged                                  | DeepSpeed/fairseq loss scalers, Megatron NaN checks,    |
|               |                                           | Lightning, torch.autograd anomaly mode                  |
| completion    | (evidence of a finished run)              | torchrun elastic, DeepSpeed launcher, Lightning, HF     |
|               |                                           | Trainer, Megatron, torchtitan, LSF                      |
SLURM's and submitit's own verdicts stay in analysis.logs.patterns (NODE, PREEMPTED, TIME_LIMIT, CANCELLED).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from analysis.logs.logtext import message_of
from launcher.core.kinds import FailureKind

MAX_HITS = 2000  # occurrences of one needle that are tested against its shapes
_AROUND = (300, 600)  # a shape is tested on the needle's line, cut to this many characters before / after it


@dataclass(frozen=True)
class Row:
    needle: str  # plain substring, found with str.find
    kind: FailureKind
    label: str  # what the match means; the reason is "label: the matched line"
    source: str  # where the wording comes from
    example: str  # a line in the family's shape, written for the tests (not taken from a test log)
    shape: re.Pattern[str] | None = None  # the text around the needle must match this too

    def matches(self, line: str) -> bool:
        """The shape accepts the line as written or without its launcher prefixes and timestamp (logtext.message_of:
        a shape anchored at the line's start still matches behind `server1: ` or `[rank3]: `)."""
        if self.shape is None or self.shape.search(line) is not None:
            return True
        body = message_of(line)
        return body is not line and self.shape.search(body) is not None


def rows(kind: FailureKind, label: str, source: str,
         *items: tuple[str, str] | tuple[str, str, str]) -> tuple[Row, ...]:
    """(needle, example) or (needle, example, shape regex) -> rows of one kind, label and source."""
    out = []
    for item in items:
        shape = re.compile(item[2]) if len(item) == 3 else None
        out.append(Row(item[0], kind, label, source, item[1], shape))
    return tuple(out)


def line_around(text: str, idx: int) -> str:
    """The line holding text[idx], cut to _AROUND characters either side (a giant line stays cheap)."""
    low = max(0, idx - _AROUND[0])
    newline = text.rfind("\n", low, idx)
    start = newline + 1 if newline >= 0 else low
    end = text.find("\n", idx, idx + _AROUND[1])
    return text[start: idx + _AROUND[1] if end < 0 else end]


def first_match(text: str, table: Sequence[Row], start: int = 0) -> tuple[int, Row] | None:
    """The first row (in table order: most telling first) whose needle occurs in text[start:] on a line its shape
    accepts; with the position of that occurrence."""
    hits: dict[str, list[int]] = {}
    for row in table:
        found = hits.get(row.needle)
        if found is None:
            found, pos = [], text.find(row.needle, start)
            while pos >= 0 and len(found) < MAX_HITS:
                found.append(pos)
                pos = text.find(row.needle, pos + len(row.needle))
            hits[row.needle] = found
        for idx in found:
            if row.matches(line_around(text, idx)):
                return idx, row
    return None
