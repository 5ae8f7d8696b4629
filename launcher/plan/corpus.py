"""Published training runs (tests/data/published/*.csv, one CSV per source) as estimator requests with what they
measured: the data of the leave-one-source-out benchmark (tests/benchmarks/bench_estimator.py) and of the fit of the
a-priori constants (launcher.plan.fit).

The CSV columns are described in tests/data/published/README.md. A row becomes a `CorpusRow`: the model shape, a
cluster from the datasheet table (launcher.plan.hardware; the row's network, when it states a per-GPU or per-node
NIC bandwidth, replaces the reference system's), the Layout, the precision, the `Workload` (stack, FSDP mode,
recompute every k-th layer, offload, torch.compile) and the measurements: step time (stated, or derived from a
stated MFU with model FLOPs, launcher.plan.flops.model_flops, the convention of Megatron, nanotron and the PaLM
formula with the output layer), the peak memory in GB (GiB converted) and what that peak counts (`mem_quantity`,
launcher.plan.mem_quantity: the vocabulary word `mem_how` starts with). Inputs a source leaves open that change the
memory (an empty flash_attention cell in a 16-bit run, an empty recompute cell) are not guessed: the row carries
every plausible setting (`memory_variants`) and its memory is judged on the interval they span (launcher.plan.fit).
Rows the estimator cannot represent (MoE, FP4, recompute of named modules, a missing micro-batch size) are kept
out with the reason, so that the benchmark can say how many and why.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, overload

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.plan import flops
from launcher.plan.hardware import cluster_for, find_spec
from launcher.plan.mem_quantity import MemQuantityError, parse_mem_how
from launcher.plan.workload import Workload

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "published"
REPLAY_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "replay"
STATES = ("ok", "oom", "crash_or_oom")
"""A row's outcome: ran, ran out of memory, or failed in a way its source does not tell apart from an OOM (the
Ultra-Scale Playbook's 'crashed/oom': hangs and NCCL failures too). crash_or_oom rows are scored apart: an OOM
predicted for them is right or a crash, a fit predicted for them is not a missed OOM for certain."""
LEARNED_POSITIONS_MAX = 8192
"""GPT/BLOOM-style (LayerNorm) rows get learned position embeddings for at most this many positions: GPT-3-style
recipes learn them up to 2048-8192; BLOOM uses ALiBi and long-context runs rotary embeddings, which have no
parameters (a 256k-position table would be 1.6B replicated parameters, more than a 30B model's TP shard)."""
ASSUMED_VOCAB = 51200
"""Vocabulary assumed where a source does not state it (MLPerf GPT-3: SentencePiece, size not in the logs): the
GPT-2 BPE size padded, 0.4 % of the FLOPs of a 175B model, so the choice hardly matters."""
MemoryVariant = tuple[Layout, Workload, bool]
"""(Layout, Workload, flash): one setting a source leaves possible (CorpusRow.memory_variants)."""


@dataclass(frozen=True)
class CorpusRow:
    source: str
    ref: str
    model: ModelConfig
    cluster: ClusterConfig
    layout: Layout
    precision: str                 # bf16, fp16, fp32, fp8
    workload: Workload
    flash: bool
    state: str                     # ok, oom
    step_time_s: Optional[float]
    peak_mem_gb: Optional[float]   # GB = 1e9 bytes
    mem_quantity: str              # launcher.plan.mem_quantity.QUANTITIES ('' without a memory figure)
    stack_version: str
    fp8_format: str = ""           # '', 'fp8' (delayed/current scaling), 'mxfp8' (block scaling)
    fitted: bool = True
    """The constants are fitted on this row (False: it is only predicted and judged; ReplaySource.fitted)."""
    memory_variants: tuple[MemoryVariant, ...] = ()
    """(Layout, Workload, flash) settings other than the nominal one that the source leaves possible (an unstated
    flash attention or recompute): the memory prediction spans them all. Empty when every such input is stated."""

    @property
    def group(self) -> tuple[str, str, str, int, str]:
        """Rows whose ranking is compared (same-model Spearman): one campaign (source, stack version) of one model
        on one GPU at one sequence length; the configurations differ in layout, batch and precision."""
        return (self.source, self.model.name, self.cluster.name, self.model.seq_len, self.stack_version)

    @property
    def backend(self) -> str:
        """The backend name the estimator's stack presets know (launcher.plan.constants.constants_for)."""
        return {"parasweep_workload": "torch", "megatron_deepspeed": "megatron_deepspeed"}.get(self.workload.stack,
                                                                                              "megatron_lm")


@dataclass(frozen=True)
class Skipped:
    source: str
    ref: str
    reason: str


def _bool(text: str) -> Optional[bool]:
    t = text.strip().lower()
    return {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}.get(t)


@overload
def _int(text: str) -> Optional[int]: ...
@overload
def _int(text: str, default: int) -> int: ...
def _int(text: str, default: Optional[int] = None) -> Optional[int]:
    t = text.strip()
    return int(float(t)) if t else default


def _float(text: str) -> Optional[float]:
    t = text.strip()
    try:
        value = float(t)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


class RowError(ValueError):
    """A row the estimator cannot represent; the message is the reason."""


def inter_node_gbytes_per_s(network: str, gpus_per_node: int) -> Optional[float]:
    """Per-GPU scale-out bandwidth (GB/s) from a row's network text, None when nothing is stated:
    '8x400Gb/s InfiniBand NDR per node' = 8 NICs of 400 Gb/s per node; '... 200Gb/s per node' = one node total;
    '400 Gbps per GPU' and a bare '400Gbps inter-node' = one NIC per GPU (rail-optimised clusters; the FSDP runs of
    the corpus move more bytes per second than a node total of 400 Gb/s could carry)."""
    text = network.lower().replace("gb/s", "gbps").replace("gbit/s", "gbps")
    m = re.search(r"(\d+)\s*x\s*(?:[a-z ]*?)(\d+(?:\.\d+)?)\s*gbps", text)
    if m:
        return int(m.group(1)) * float(m.group(2)) / 8 / gpus_per_node
    m = re.search(r"(\d+(?:\.\d+)?)\s*gbps", text)
    if not m:
        return None
    gbits = float(m.group(1))
    return gbits / 8 / (gpus_per_node if "per node" in text else 1)


UNSTATED = "unstated:"
"""Prefix of a recompute value the source does not state but the row's other evidence points to ('unstated:full'):
the named mode is the nominal setting (the step time's), and the memory spans every mode, as for an empty cell."""


def _recompute(text: str) -> tuple[str, int, bool]:
    """(Layout.recompute, every k-th layer, offload) from the CSV's recompute column ('unstated:<mode>': <mode>)."""
    t = text.strip().lower()
    if t.startswith(UNSTATED):
        t = t[len(UNSTATED):]
    if t in ("", "none"):
        return "none", 1, False
    if t in ("selective", "full"):
        return t, 1, False
    if t.startswith("full_every_k:"):
        return "full", int(t.split(":", 1)[1]), False
    if t == "offload":
        return "full", 1, True
    raise RowError(f"recompute {text!r} not modelled")


def _precision(text: str) -> tuple[str, str]:
    t = text.strip().lower()
    if t in ("bf16", "fp16", "fp32"):
        return t, ""
    if t in ("fp8", "mxfp8"):
        return "fp8", t
    raise RowError(f"precision {text!r} not modelled")


def _stack(text: str) -> str:
    t = text.strip().lower()
    return t.split(":", 1)[1] if t.startswith("other:") else t


def _attention_kernel(notes: str) -> str:
    """The flash-attention kernel a row's notes name ('' when they name none)."""
    n = notes.lower()
    if "triton" in n:
        return "triton"
    if "cudnn" in n or "flashattention-3" in n or "flash attention 3" in n:
        return "fa3"
    if "flashattention v2" in n or "flash_attention_2" in n or "flashattention-2" in n or "flash attention v2" in n:
        return "fa2"
    return ""


def _open_variants(layout: Layout, workload: Workload, flash: bool, flash_open: bool, recompute_open: bool
                   ) -> tuple[MemoryVariant, ...]:
    """Every (Layout, Workload, flash) setting an unstated input leaves possible, besides the nominal one: flash
    attention on or off, recompute none / selective / full (every layer)."""
    flashes = (True, False) if flash_open else (flash,)
    recomputes = ("none", "selective", "full") if recompute_open else (layout.recompute,)
    out = []
    for f in flashes:
        for rc in recomputes:
            if (f, rc) == (flash, layout.recompute):
                continue
            out.append((replace(layout, recompute=rc, recompute_every=1), replace(workload, offload=False), f))
    return tuple(out)


def _mfu_peak_tflops(convention: str, default: float) -> float:
    m = re.search(r"(\d{3,4}(?:\.\d+)?)\s*tflop", convention.lower())
    return float(m.group(1)) if m else default


def parse_row(r: Mapping[str, str]) -> CorpusRow:
    """One CSV row -> CorpusRow (raises RowError with the reason when the estimator cannot represent it)."""
    if _int(r.get("num_experts", ""), 1) not in (0, 1):
        raise RowError("mixture of experts not modelled")
    precision, fp8_format = _precision(r["precision"])
    recompute, every, offload = _recompute(r.get("recompute", ""))
    mbs = _int(r.get("mbs", ""))
    if not mbs:
        raise RowError("micro-batch size not stated")
    gated = bool(_bool(r.get("gated_ffn", "")))
    heads = int(r["heads"])
    vocab = _int(r.get("vocab", "")) or ASSUMED_VOCAB
    model = ModelConfig(name=r["model"], layers=int(r["layers"]), hidden=int(r["hidden"]), heads=heads,
                        kv_heads=_int(r.get("kv_heads", ""), heads), ffn_hidden=_int(r.get("ffn_hidden", ""), 0),
                        swiglu=gated, seq_len=int(r["seq_len"]), vocab=vocab,
                        tied_embeddings=_bool(r.get("tied_embeddings", "")) is not False if not gated
                        else bool(_bool(r.get("tied_embeddings", ""))),
                        norm="rmsnorm" if gated else "layernorm",
                        max_position=min(int(r["seq_len"]), LEARNED_POSITIONS_MAX))
    spec = find_spec(r["gpu"])
    if spec is None:
        raise RowError(f"gpu {r['gpu']!r} not in the datasheet table")
    n = int(r["n_gpus"])
    gpn = _int(r.get("gpus_per_node", "")) or min(spec.nvlink_domain, n)
    if spec.nvlink_domain > 8 and not _int(r.get("gpus_per_node", "")):
        gpn = min(spec.nvlink_domain, n)
    nic = inter_node_gbytes_per_s(r.get("network", ""), gpn)
    cluster = cluster_for(spec.name, n, gpn, nic)
    tp, pp, cp = _int(r.get("tp", ""), 1), _int(r.get("pp", ""), 1), _int(r.get("cp", ""), 1) or 1
    dp = _int(r.get("dp", "")) or n // (tp * pp * cp)
    if tp * pp * cp * dp != n:
        raise RowError(f"tp*pp*cp*dp = {tp * pp * cp * dp} != n_gpus {n}")
    fsdp = r.get("fsdp", "").strip().lower()
    fsdp = {"megatron_fsdp": "full_shard", "optim_grads_params": "full_shard", "true": "fsdp2"}.get(fsdp, fsdp)
    zero = _int(r.get("zero_stage", ""), 0) or 0
    if not fsdp and not zero and _stack(r.get("stack", "")) == "pytorch_fsdp" and n > 1:
        fsdp = "full_shard"    # a PyTorch FSDP run whose sharding is not stated: FSDP's default, FULL_SHARD
    if fsdp:
        zero = 2 if fsdp == "shard_grad_op" else 3
    stack = _stack(r.get("stack", ""))
    version = r.get("stack_version", "").lower()
    if "kempnerforge" in version:
        stack = "kempnerforge"   # its own stack: a bf16 model, gathered logits (launcher.plan.stack)
    if stack == "megatron_lm" and ("transformer-impl local" in version or "no te" in version):
        stack = "megatron_local"   # Megatron-LM without Transformer Engine, apex or its fusions
    seq_par = _bool(r.get("sequence_parallel", ""))
    if seq_par is None:   # nanotron's default tp_mode REDUCE_SCATTER is sequence parallelism; KempnerForge uses
        #                   SequenceParallel except on pipeline stages
        seq_par = tp > 1 and (stack in ("nanotron", "nemo", "torchtitan_like")
                              or (stack == "kempnerforge" and pp == 1))
    layout = Layout(gpus=n, nodes=max(1, -(-n // gpn)), tp=tp, pp=pp, dp=dp, cp=cp,
                    vpp=_int(r.get("vpp", ""), 1) or 1, mbs=mbs, gbs=int(r["gbs"]), recompute=recompute,
                    recompute_every=every,
                    sequence_parallel=bool(seq_par and tp > 1), zero_stage=zero,
                    distributed_optimizer=bool(_bool(r.get("distributed_optimizer", ""))) and not fsdp)
    if layout.microbatches < 1:
        raise RowError(f"gbs {layout.gbs} < mbs x dp = {mbs * dp}")
    workload = Workload(stack=stack, fsdp=fsdp, reshard_after_forward=_bool(r.get("reshard_after_forward", "")),
                        offload=offload,
                        torch_compile=bool(_bool(r.get("torch_compile", ""))),
                        attention_kernel=_attention_kernel(r.get("notes", "")))
    flash = _bool(r.get("flash_attention", ""))
    state = r.get("state", "").strip().lower()
    if state not in STATES:
        raise RowError(f"state {state!r}: use one of {', '.join(STATES)}")
    step = _float(r.get("step_time_s", ""))
    if step is None and state == "ok":
        tokens = _float(r.get("tokens_per_s_per_gpu", ""))
        mfu = _float(r.get("mfu", ""))
        if tokens:
            step = layout.gbs * model.seq_len / (tokens * n)
        elif mfu:
            peak = _mfu_peak_tflops(r.get("tflops_convention", ""), spec.bf16_tflops)
            step = flops.model_flops(model, layout.gbs, model.vocab) / (mfu * peak * 1e12 * n)
    mem = _float(r.get("peak_mem_gb", ""))
    how = r.get("mem_how", "")
    try:
        quantity = parse_mem_how(how)
    except MemQuantityError as exc:
        raise RowError(str(exc)) from None
    if mem is not None and not quantity:
        raise RowError("peak_mem_gb without a mem_how quantity")
    if mem is not None and "gib" in how.lower():
        mem *= 1024 ** 3 / 1e9
    # flash attention not stated: the 16-bit default (flash) for the step time, both settings for the memory
    flash_open = flash is None and precision != "fp32"
    nominal_flash = True if flash_open else bool(flash)
    # recompute not stated: empty (nominal none) or 'unstated:<mode>' (nominal <mode>, e.g. a step time the source
    # derived with the checkpointing factor): the memory spans none / selective / full either way
    recompute_open = not r.get("recompute", "").strip() or r["recompute"].strip().lower().startswith(UNSTATED)
    variants = _open_variants(layout, workload, nominal_flash, flash_open, recompute_open)
    return CorpusRow(r["source_id"], r.get("row_ref", ""), model, cluster, layout, precision, workload,
                     nominal_flash, state, step, mem, quantity, r.get("stack_version", ""), fp8_format,
                     memory_variants=variants)


def read_source(path: Path) -> tuple[list[CorpusRow], list[Skipped]]:
    with path.open() as f:
        records = list(csv.DictReader(line for line in f if not line.startswith("#")))
    rows, skipped = [], []
    for r in records:
        try:
            rows.append(measured_network(parse_row(r)))
        except (RowError, ValueError, KeyError) as exc:
            skipped.append(Skipped(r.get("source_id", path.stem), r.get("row_ref", ""), str(exc)))
    return rows, skipped


@dataclass(frozen=True)
class ReplaySource:
    """How a published replay table (tests/data/replay/pub_*.csv, launcher.measured's format, documented in
    tests/data/replay/PUBLISHED.md) becomes corpus rows: what its header comments say about the whole table."""

    source: str            # the corpus source it belongs to (one measurement campaign = one LOSO source)
    stack: str
    stack_version: str
    mem_how: str           # launcher.plan.mem_quantity vocabulary first
    oom_state: str         # what its 'oom' rows are (STATES)
    network: str = ""
    fitted: bool = True    # its rows take part in the fit of the constants (else they are only judged)


SOURCE_NETWORK_STEP_S = {"nanotron_ultrascale_best": 43.5e-6}
"""Sources that measured their own cluster's network, as the seconds one ring step waits across nodes beyond its
bytes (Workload.network_step_s): every row of the source (its published CSV and its replay table: one campaign, one
cluster) is priced with it. nanotron_ultrascale_best: the Ultra-Scale Playbook's figure 'Communication Bandwidth by
Number of Nodes (size=256MB)' (section 'Pipeline Parallelism'; assets/data/benchmarks/pp_comm_bandwidth.html of the
mirror vinjn/nanotron-ultrascale-playbook e3bcfc5c; the Playbook names the network: 'communicating between nodes
(EFA)'), median bus bandwidth over every GPU of 1-64 nodes of 8 H100: all-gather 249.8, 184.6, 119.0, 69.0, 55.0,
28.0, 11.0 GB/s and reduce-scatter 249.7, 181.6, 115.8, 68.6, 54.5, 27.9, 11.1 GB/s at 1, 2, 4, ... 64 nodes
(all-reduce 436, 362, 160, 99.6, 84.7, 64.9, 32.9). A 256 MB all-gather thus takes 1.36 ms on 2 nodes and 24.3 ms
on 64, where its bytes need ~0.65 ms at the nodes' 400 GB/s (p5: 32 x 100 Gb/s EFA per node): the rest grows with
the ring's n - 1 steps, 33-51 us per step at every node count, 43.5 us by least squares over the 12 all-gather and
reduce-scatter points (the all-reduce's: 29 us per n - 1)."""

REPLAY_SOURCES = {
    "pub_ultrascale.csv": ReplaySource(
        "nanotron_ultrascale_best", "nanotron", "nanotron v0.5",
        "allocated_or_reserved: the playbook figure's 'GPU memory' (GB), read by bench_cluster from nanotron's "
        "'Peak allocated / Peak reserved' log line; which one is not said",
        "crash_or_oom", network="AWS EFA between nodes of 8 x H100 (the Playbook: 'communicating between nodes "
        "(EFA)')", fitted=False),
    "pub_vtrain.csv": ReplaySource("vtrain", "megatron_deepspeed", "Megatron-DeepSpeed (vTrain validation runs)",
                                   "", "oom", fitted=False),
}
"""The Ultra-Scale Playbook grid is the same campaign as nanotron_ultrascale_best (its best configurations): one
source for leave-one-source-out. Its 'oom' rows are 'crashed/oom' in the source (PUBLISHED.md). vTrain lists only
runs that finished and gives no memory. Both tables are judged, not fitted on (`fitted=False`): fitting the step-time
constants on them made every other source's out-of-sample step error worse (issue 15, physics2 status: with the
grid in the fit the latency multiplier went to 17-22x and FP8 to 20-34x; with vTrain alone in it the dispatch
multiplier to 2.5x and parasweep's own sweep from 12 % to 33 % median), while their own errors are dominated by what
the estimator does not know (the playbook cluster's behaviour at 32-64 nodes, repeats differing up to 5x)."""


def replay_record(raw: Mapping[str, str], spec: ReplaySource) -> dict[str, str]:
    """A replay-table row (launcher.measured columns) as a published-corpus record (tests/data/published columns)."""
    state = raw.get("state", "").strip()
    return {
        "source_id": spec.source, "row_ref": f"{raw.get('sweep', '')} tp{raw['tp']} pp{raw['pp']} dp{raw['dp']} "
                                             f"mbs{raw['mbs']} z{raw.get('zero_stage', '')}",
        "model": f"{raw['layers']}x{raw['hidden']}", "layers": raw["layers"], "hidden": raw["hidden"],
        "ffn_hidden": raw.get("ffn_hidden", ""), "heads": raw["heads"], "kv_heads": raw.get("kv_heads", ""),
        "vocab": raw.get("vocab", ""), "seq_len": raw["seq_len"], "gated_ffn": raw.get("swiglu", ""),
        "tied_embeddings": raw.get("tied_embeddings", ""), "gpu": raw["gpu"], "n_gpus": raw["n_gpus"],
        "gpus_per_node": raw.get("gpus_per_node", ""), "network": spec.network, "stack": spec.stack,
        "stack_version": spec.stack_version, "precision": raw.get("precision", "") or "bf16",
        "tp": raw["tp"], "pp": raw["pp"], "dp": raw["dp"], "cp": raw.get("cp", ""), "vpp": raw.get("vpp", ""),
        "mbs": raw["mbs"], "gbs": raw["gbs"], "recompute": raw.get("recompute", ""),
        "sequence_parallel": raw.get("sequence_parallel", ""), "zero_stage": raw.get("zero_stage", ""),
        "distributed_optimizer": raw.get("distributed_optimizer", ""),
        "flash_attention": raw.get("flash_attention", ""),
        "state": spec.oom_state if state == "oom" else state, "step_time_s": raw.get("step_time_s", ""),
        "peak_mem_gb": raw.get("peak_mem_gb", "") if spec.mem_how else "",
        "mem_how": spec.mem_how if raw.get("peak_mem_gb", "").strip() else "",
    }


def read_replay(path: Path) -> tuple[list[CorpusRow], list[Skipped]]:
    """The rows of a published replay table registered in REPLAY_SOURCES."""
    spec = REPLAY_SOURCES[path.name]
    with path.open() as f:
        records = list(csv.DictReader(line for line in f if not line.startswith("#")))
    rows, skipped = [], []
    for raw in records:
        record = replay_record(raw, spec)
        try:
            row = parse_row(record)
        except (RowError, ValueError, KeyError) as exc:
            skipped.append(Skipped(spec.source, record["row_ref"], str(exc)))
            continue
        row = measured_network(row)
        rows.append(row if spec.fitted else replace(row, fitted=False))
    return rows, skipped


def measured_network(row: CorpusRow) -> CorpusRow:
    """The row with its source's measured network step latency (SOURCE_NETWORK_STEP_S), if the source has one."""
    step_s = SOURCE_NETWORK_STEP_S.get(row.source)
    if step_s is None:
        return row
    return replace(row, workload=replace(row.workload, network_step_s=step_s))


def read_corpus(folder: Path = DEFAULT_DIR, sources: Optional[Iterable[str]] = None,
                replay: Optional[Path] = None) -> tuple[list[CorpusRow], list[Skipped]]:
    """Every source CSV in `folder` (or only `sources`), in name order; with `replay` (a folder, e.g. REPLAY_DIR)
    also the published replay tables of REPLAY_SOURCES found there (rows of the source they belong to)."""
    rows: list[CorpusRow] = []
    skipped: list[Skipped] = []
    wanted = set(sources) if sources else None
    paths = [(p, read_source) for p in sorted(Path(folder).glob("*.csv"))]
    if replay is not None:
        paths += [(Path(replay) / name, read_replay) for name in REPLAY_SOURCES if (Path(replay) / name).exists()]
    for path, reader in paths:
        source = REPLAY_SOURCES[path.name].source if reader is read_replay else path.stem
        if wanted is not None and source not in wanted:
            continue
        r, s = reader(path)
        rows += r
        skipped += s
    return rows, skipped
