"""Structured config schema: dataclasses registered in Hydra's ConfigStore, validated once at load.

Every field carries a docstring-style comment. `__post_init__` validation runs when the composed config is
turned into objects (`OmegaConf.to_object`), so a bad value fails before anything is planned or submitted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from analysis.select import OBJECTIVES
from launcher.errors import ConfigError
from launcher.layout import DIMENSIONS, Dimension, dimension, grid_defaults

PRECISIONS = ("bf16", "fp16", "fp32")
BACKENDS = ("torch", "megatron_deepspeed", "megatron_lm")
EXECUTORS = ("local", "slurm")
TRANSFORMER_IMPLS = ("transformer_engine", "local")
MODEL_TOKENIZERS = ("", "gpt2", "sentencepiece", "huggingface")
MAX_SWEEP_NAME_CHARS = 100


def _positive(section: str, name: str, value: float | int | None, fix: str = "use a number > 0") -> None:
    if value is not None and value <= 0:
        raise ConfigError(f"{section}.{name}", value, fix)


@dataclass
class ModelConfig:
    name: str = "???"
    """Registry name, e.g. 'llama2-70b' (the file name under conf/model/)."""
    layers: int = 1
    """Transformer layers L."""
    hidden: int = 64
    """Hidden size h."""
    heads: int = 1
    """Attention heads a."""
    kv_heads: Optional[int] = None
    """Key/value heads for GQA/MQA (None: = heads, plain multi-head attention)."""
    ffn_hidden: Optional[int] = None
    """FFN inner size (None: 4*h, or the Llama SwiGLU size 2/3*4h rounded up to 256 when swiglu)."""
    swiglu: bool = False
    """Gated SwiGLU FFN (three FFN matrices instead of two)."""
    seq_len: int = 2048
    """Training sequence length s."""
    max_position: Optional[int] = None
    """Maximum position embeddings (None: = seq_len)."""
    vocab: int = 51200
    """Vocabulary size V before padding."""
    tied_embeddings: bool = True
    """Input embedding and output layer share weights (GPT); Llama unties them."""
    norm: str = "layernorm"
    """'layernorm' or 'rmsnorm'."""
    source: str = ""
    """Where the shape comes from (paper, model card)."""
    tokenizer: str = ""
    """The tokenizer the model was trained with, which Megatron must load: 'gpt2' (BPE vocab + merges files),
    'sentencepiece' (a tokenizer.model: Llama 1/2, Mistral), 'huggingface' (Llama 3, Qwen2) or '' (not said: set
    backend.megatron.tokenizer_type yourself). The Megatron backends pick their --tokenizer-type from it."""
    hf_config: str = ""
    """A Hugging Face config.json (or the folder holding it) to read the shape from (model=hf): layers, hidden,
    heads, kv_heads, ffn_hidden, swiglu, vocab, max_position, tied_embeddings and norm come from the file."""

    def __post_init__(self) -> None:
        if self.hf_config or self.name == "hf":
            from launcher.hf_config import apply_to_model

            apply_to_model(self)
        for name in ("layers", "hidden", "heads", "seq_len", "vocab"):
            _positive("model", name, getattr(self, name), "use a positive integer")
        if self.kv_heads is None:
            self.kv_heads = self.heads
        _positive("model", "kv_heads", self.kv_heads, "use a positive integer (or leave it unset for MHA)")
        if self.heads % self.kv_heads:
            raise ConfigError("model.kv_heads", self.kv_heads, f"heads ({self.heads}) must be divisible by kv_heads")
        if self.ffn_hidden is None:
            self.ffn_hidden = swiglu_ffn(self.hidden) if self.swiglu else 4 * self.hidden
        _positive("model", "ffn_hidden", self.ffn_hidden, "use a positive integer")
        if self.max_position is None:
            self.max_position = self.seq_len
        if self.tokenizer not in MODEL_TOKENIZERS:
            raise ConfigError("model.tokenizer", self.tokenizer, f"use one of {', '.join(MODEL_TOKENIZERS[1:])} (or "
                              "leave it empty)")
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ConfigError("model.norm", self.norm, "use 'layernorm' or 'rmsnorm'")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def swiglu_ffn(hidden: int, multiple_of: int = 256) -> int:
    """Llama's SwiGLU FFN size: 2/3 of 4h, rounded up to a multiple of 256 (Touvron et al. 2023, model.py)."""
    raw = int(2 * 4 * hidden / 3)
    return multiple_of * ((raw + multiple_of - 1) // multiple_of)


@dataclass
class ClusterConfig:
    name: str = "???"
    """Preset name (file under conf/cluster/)."""
    gpu: str = "???"
    """Accelerator model, for people reading the plan."""
    gpu_mem_gb: float = 80.0
    """Device memory per GPU, GB (1e9 bytes)."""
    peak_tflops: float = 312.0
    """Dense 16-bit (bf16/fp16) tensor-core peak per GPU, TFLOP/s."""
    gpus_per_node: int = 8
    """GPUs in one node (the tensor-parallel domain)."""
    intra_node_gbytes_per_s: float = 300.0
    """Per-GPU unidirectional bandwidth inside a node (NVLink / NVSwitch), GB/s."""
    inter_node_gbytes_per_s: float = 25.0
    """Per-GPU bandwidth between nodes (InfiniBand / RoCE NICs shared by the node's GPUs), GB/s."""
    hbm_gbytes_per_s: float = 2039.0
    """Device memory bandwidth, GB/s (memory-bound element-wise kernels)."""
    nodes: int = 1
    """Nodes available to the sweep."""
    partition: str = "benchmark"
    """The dedicated SLURM partition for benchmark jobs."""
    source: str = ""
    """Where the numbers come from (datasheet)."""

    def __post_init__(self) -> None:
        for name in ("gpu_mem_gb", "peak_tflops", "gpus_per_node", "intra_node_gbytes_per_s",
                     "inter_node_gbytes_per_s", "hbm_gbytes_per_s", "nodes"):
            _positive("cluster", name, getattr(self, name))


@dataclass
class MegatronConfig:
    """Settings only the Megatron backends read (megatron_deepspeed, megatron_lm): backend.megatron.*"""

    path: str = ""
    """Checkout of Megatron-DeepSpeed / Megatron-LM on the cluster (the folder holding pretrain_gpt.py)."""
    data_path: str = ""
    """Megatron data prefix, or Megatron's 'weight prefix weight prefix ...' list ('' = synthetic data where the
    program has it: Megatron-LM's --mock-data)."""
    tokenizer_type: str = ""
    """Megatron --tokenizer-type ('' = follow the model: NullTokenizer on synthetic data where the program has it,
    else the program's type for model.tokenizer: GPT2BPETokenizer, Llama2Tokenizer / GPTSentencePieceTokenizer,
    HuggingFaceTokenizer / HFTokenizer)."""
    vocab_file: str = ""
    """Megatron --vocab-file (GPT2BPETokenizer, BERT tokenizers)."""
    merge_file: str = ""
    """Megatron --merge-file (GPT2BPETokenizer)."""
    tokenizer_model: str = ""
    """Megatron --tokenizer-model (SentencePiece / Llama / HF tokenizers)."""
    transformer_impl: str = "transformer_engine"
    """Megatron-LM --transformer-impl: 'transformer_engine' (NVIDIA's fused kernels), or 'local' for a machine without
    Transformer Engine and apex (it then also turns off the fusions that need them, and has no flash attention)."""

    def __post_init__(self) -> None:
        if self.transformer_impl not in TRANSFORMER_IMPLS:
            raise ConfigError("backend.megatron.transformer_impl", self.transformer_impl,
                              f"use one of {', '.join(TRANSFORMER_IMPLS)}")


@dataclass
class BackendConfig:
    """The program a trial runs and how long it measures. Program-specific settings live in their own section."""

    name: str = "torch"
    """Which program runs a trial: 'torch' (embedded GPT), 'megatron_deepspeed' or 'megatron_lm'."""
    precision: str = "bf16"
    """'bf16' or 'fp16' mixed precision, 'fp32', or 'auto': what the hardware does well (bf16 on GPU clusters, fp32 on
    the CPU stand-in), resolved when the config is loaded."""
    warmup_iters: int = 3
    """Iterations run before measuring (also detected from the log for Megatron backends)."""
    measure_iters: int = 5
    """Iterations measured per trial."""
    seed: int = 1234
    """Seed for weights and synthetic data (same seed: same losses in every layout)."""
    launcher: str = "torchrun"
    """Per-node launcher under srun: 'torchrun' or 'deepspeed'."""
    flash_attention: bool = True
    """Use flash attention (Megatron: --use-flash-attn / --use-flash-attn-v2)."""
    extra_args: List[str] = field(default_factory=list)
    """Further program arguments, passed through (shell-quoted)."""
    python: str = ""
    """Python interpreter that runs a trial on the compute nodes ('' = the launcher's own interpreter, as submitit
    does: right when the nodes see the same filesystem; 'python' = whatever the nodes' PATH gives)."""
    startup_s: float = 180.0
    """Expected job start-up before the first iteration (init, data, kernels), for GPU-hour estimates."""
    megatron: MegatronConfig = field(default_factory=MegatronConfig)
    """backend.megatron.*: checkout, data and tokenizer of the Megatron backends."""

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ConfigError("backend.name", self.name, f"use one of {', '.join(BACKENDS)}")
        if self.precision not in PRECISIONS + ("auto",):
            raise ConfigError("backend.precision", self.precision, f"use one of {', '.join(PRECISIONS)} or auto "
                              "(bf16 on GPU clusters, fp32 on the CPU stand-in)")
        if self.launcher not in ("torchrun", "deepspeed"):
            raise ConfigError("backend.launcher", self.launcher, "use 'torchrun' or 'deepspeed'")
        _positive("backend", "measure_iters", self.measure_iters, "use at least 1")
        if self.warmup_iters < 0:
            raise ConfigError("backend.warmup_iters", self.warmup_iters, "use 0 or more")


@dataclass
class ExecutorConfig:
    name: str = "local"
    """'local' (processes on this machine) or 'slurm'."""
    timeout_min: int = 10
    """Wall-clock limit per trial, minutes (always set: submitit's local default kills after ~2 min)."""
    max_concurrent: int = 0
    """Trials running at once (local) or the array throttle %N (slurm); 0 = what the cores / nodes allow."""
    queue_all: bool = False
    """SLURM: queue every trial at once (one sbatch per resource shape, SLURM's %N throttle starts them) instead of in
    waves of what can run at once. Waves let the search re-rank, re-prune and stop between trials
    (launcher/run/search.py); queueing all saves sbatch calls and queue waits, but the order is then fixed."""
    account: str = ""
    """SLURM --account."""
    qos: str = ""
    """SLURM --qos."""
    constraint: str = ""
    """SLURM --constraint."""
    exclusive: bool = True
    """SLURM --exclusive (benchmarks should not share nodes)."""
    reservation: str = ""
    """SLURM --reservation."""
    cpus_per_task: int = 0
    """SLURM --cpus-per-task (0 = leave to SLURM)."""
    mem_gb: int = 0
    """SLURM --mem per node, GB (0 = leave to SLURM)."""
    signal_delay_s: int = 30
    """Seconds before the limit at which SLURM sends USR2 (submitit's default 90 s is too long for short jobs)."""
    setup: List[str] = field(default_factory=list)
    """Shell lines run before the trial (module load, venv or conda activation)."""
    env: Dict[str, str] = field(default_factory=dict)
    """Environment variables for the job."""
    sbatch_args: Dict[str, str] = field(default_factory=dict)
    """Extra #SBATCH options, e.g. {mail-type: FAIL}."""
    srun_args: List[str] = field(default_factory=list)
    """Extra srun arguments."""
    exclude_nodes: List[str] = field(default_factory=list)
    """Nodes never to use (failing nodes are added for retries automatically)."""

    def __post_init__(self) -> None:
        if self.name not in EXECUTORS:
            raise ConfigError("executor.name", self.name, f"use one of {', '.join(EXECUTORS)}")
        _positive("executor", "timeout_min", self.timeout_min, "use a positive number of minutes")
        if self.max_concurrent < 0:
            raise ConfigError("executor.max_concurrent", self.max_concurrent, "use 0 (automatic) or more")
        for name in ("signal_delay_s", "cpus_per_task", "mem_gb"):
            if getattr(self, name) < 0:
                raise ConfigError(f"executor.{name}", getattr(self, name), "use 0 or more")


def _validate_grid(self) -> None:
    """Every value of every list is one the Layout field accepts (launcher.layout.Dim: choices or integers >= 1)."""
    for d in DIMENSIONS:
        for value in getattr(self, d.name, None) or []:
            _check_dimension_value(d, value)


def _check_dimension_value(d: Dimension, value: object) -> None:
    if d.dim.choices is not None:
        if value not in d.dim.choices:
            raise ConfigError(f"grid.{d.name}", value, f"use one of {', '.join(map(str, d.dim.choices))}")
    elif d.type is int and value < 1:
        raise ConfigError(f"grid.{d.name}", value, "use positive integers")


def _grid_config_class() -> type:
    """GridConfig, generated from the Layout's fields: one list per dimension (`nodes` or `gpus` for the world;
    a dimension without a grid default, dp, is derived when left None), plus zip / include / exclude."""
    lists = {int: List[int], str: List[str], bool: List[bool]}
    specs: list[tuple] = [(name, Optional[List[int]], field(default=None)) for name in ("nodes", "gpus")]
    for name, default in grid_defaults():
        kind = lists[dimension(name).type]
        if default is None:
            specs.append((name, Optional[kind], field(default=None)))
        else:
            specs.append((name, kind, field(default_factory=lambda v=tuple(default): list(v))))
    specs += [
        # Groups of dimensions that vary together, e.g. [[tp, pp]] pairs tp[i] with pp[i].
        ("zip", List[List[str]], field(default_factory=list)),
        # Extra configurations added as they are (missing keys take the first value of their dimension).
        ("include", List[Dict[str, Any]], field(default_factory=list)),
        # Partial configurations removed from the grid (every given key must match).
        ("exclude", List[Dict[str, Any]], field(default_factory=list)),
    ]
    doc = ("One list per Layout dimension; the grid is their product, except zipped dimensions, which pair up.\n"
           + "\n".join(f"  {d.name}: {d.dim.doc}" for d in DIMENSIONS))
    return make_dataclass("GridConfig", specs, namespace={"__post_init__": _validate_grid, "__doc__": doc,
                                                          "__module__": __name__})


GridConfig = _grid_config_class()


@dataclass
class PlanConfig:
    mem_safety_margin: float = 0.9
    """Prune configurations whose predicted peak exceeds this share of device memory."""
    keep_borderline: float = 0.0
    """Keep configurations predicted up to this much (share of capacity) over the margin: the estimate can be wrong."""
    max_trials: int = 0
    """Trial budget (0: run every valid configuration)."""
    exploration_share: float = 0.25
    """Share of the budget given to configurations outside the predicted top, to check the ranking itself."""
    allow_tp_across_nodes: bool = False
    """Allow tensor parallelism to span nodes (slow: TP traffic on the inter-node link)."""
    seed: int = 0
    """Seed for picking the exploration share."""
    objective: str = "tokens_per_s"
    """What 'best' means, for the plan's ranking and the winner: 'tokens_per_s' (fastest, the choice at a fixed node
    count), 'tokens_per_s_per_gpu' (most efficient per GPU: what a per-GPU-hour budget buys) or 'time_to_target'
    (fastest wall-clock to plan.target_tokens; the plan prints wall-clock and GPU-hours for its top rows)."""
    target_tokens: float = 0.0
    """Tokens to train for objective=time_to_target, e.g. 2e12."""
    max_grid_points: int = 1_000_000
    """Refuse a grid whose product of dimensions exceeds this (expanding and checking takes ~5 us per point)."""
    early_stop: bool = True
    """Stop a running trial whose steady-state throughput, after early_stop_min_iters measured iterations, is worse
    than the best finished trial by more than analysis.noise_tolerance plus its own spread (state stopped_early:
    not a failure, never retried, never the winner; its partial measurement is kept)."""
    early_stop_min_iters: int = 3
    """Measured (post-warm-up) iterations a running trial must have logged before it may be stopped early; with
    backend.measure_iters at or under it no trial is stopped early."""
    network_probe: Optional[bool] = None
    """Measure the network before the trials (python -m launcher.netbench as one job, as many nodes as the largest
    trial and at least 2 when the cluster has them) and plan with the measured bus bandwidths instead of the
    cluster preset's (launcher.run.network). null (default): on the SLURM executor yes, on the local one no. The
    result is reused on resume and by later sweeps of the same cluster and node count, unless sweep.fresh."""
    prior_from: str = ""
    """A finished sweep's folder (e.g. sweeps/llama-16gpu) whose calibration.json starts this sweep's calibration:
    its fitted constants and their uncertainty become the prior (launcher.plan.calibrate.Prior.from_json), so a
    sweep at a new scale starts from what an earlier one learned. It must be of the same cluster, GPU, backend and
    precision. '' = the backend's a-priori constants."""
    stop_when_converged: bool = False
    """End the sweep when the calibrated model gives no unrun trial a real chance (launcher.run.scheduler's
    stop_rule) to beat the best by more than analysis.noise_tolerance: the remaining planned trials are pruned as
    'converged', each with its reason. plan.max_trials stays a hard cap either way."""

    def __post_init__(self) -> None:
        _positive("plan", "max_grid_points", self.max_grid_points, "use a positive number of grid points")
        if self.objective not in OBJECTIVES:
            raise ConfigError("plan.objective", self.objective, f"use one of {', '.join(OBJECTIVES)}")
        if self.objective == "time_to_target" and not 0 < self.target_tokens < float("inf"):
            raise ConfigError("plan.target_tokens", self.target_tokens, "objective=time_to_target needs the tokens "
                              "to train, e.g. plan.target_tokens=2e12")
        if not 0 < self.mem_safety_margin <= 1:
            raise ConfigError("plan.mem_safety_margin", self.mem_safety_margin, "use a share in (0, 1]")
        if not 0 <= self.exploration_share < 1:
            raise ConfigError("plan.exploration_share", self.exploration_share, "use a share in [0, 1)")
        if self.max_trials < 0:
            raise ConfigError("plan.max_trials", self.max_trials, "use 0 (no budget) or more")
        if self.keep_borderline < 0:
            raise ConfigError("plan.keep_borderline", self.keep_borderline, "use 0 (prune at the margin) or more")
        if self.early_stop_min_iters < 2:  # one step has no spread: a single slow step would stop a trial
            raise ConfigError("plan.early_stop_min_iters", self.early_stop_min_iters, "use 2 or more measured "
                              "iterations (or plan.early_stop=false to never stop a trial early)")


@dataclass
class RetryConfig:
    max_attempts: int = 2
    """Attempts per trial for retryable failures (node failure, comm error, preemption, cancel, timeout)."""

    def __post_init__(self) -> None:
        _positive("retry", "max_attempts", self.max_attempts, "use 1 (no retries) or more")


@dataclass
class MonitorConfig:
    poll_interval_s: float = 2.0
    """Seconds between two polls of all live jobs (one sacct call per poll on SLURM)."""
    hang_timeout_min: float = 5.0
    """A trial with no new iteration for this long is a hang: cancelled and retried once."""

    def __post_init__(self) -> None:
        _positive("monitor", "poll_interval_s", self.poll_interval_s, "use a positive number of seconds")
        _positive("monitor", "hang_timeout_min", self.hang_timeout_min, "use a positive number of minutes")


@dataclass
class TrackingConfig:
    uri: str = "sqlite:///mlflow.db"
    """MLflow tracking URI (sqlite file, or http://host:port of a tracking server)."""
    experiment: str = ""
    """Experiment name ('' = the sweep name)."""
    ui_url: str = "http://127.0.0.1:5000"
    """Where people open the MLflow UI (for the printed link, when the URI is not http)."""
    enabled: bool = True

    def __post_init__(self) -> None:
        # It becomes a clickable link in report.html: only a web address (no javascript:, data:, file: ...).
        if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", self.ui_url or ""):
            raise ConfigError("tracking.ui_url", self.ui_url, "use an http:// or https:// address of the MLflow UI")


@dataclass
class SweepRunConfig:
    name: str = "tiny"
    """Sweep name: the folder sweeps/<name>/ and the MLflow experiment."""
    root_dir: str = "sweeps"
    """Where sweep folders live (relative to the working directory)."""
    fresh: bool = False
    """Start a new folder (the old one is kept under a dated name) instead of resuming."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.name or ""):
            raise ConfigError("sweep.name", self.name, "use a folder name: letters, digits, '.', '_' or '-'")
        if len(self.name) > MAX_SWEEP_NAME_CHARS:  # a folder name, plus '.<date>-<time>' when sweep.fresh keeps it
            raise ConfigError("sweep.name", self.name[:40] + "...", f"is {len(self.name)} characters long: use at "
                              f"most {MAX_SWEEP_NAME_CHARS}")


@dataclass
class AnalysisConfig:
    repeats: int = 1
    """Runs of each top trial (1 = no repeats); the ranking then uses the median and reports the spread."""
    repeat_top: int = 3
    """How many of the best trials are repeated when repeats > 1."""
    noise_tolerance: float = 0.02
    """Throughputs within this share of each other tie; the tie is broken by memory headroom."""

    def __post_init__(self) -> None:
        _positive("analysis", "repeats", self.repeats, "use 1 (no repeats) or more")
        _positive("analysis", "repeat_top", self.repeat_top, "use 1 or more")
        if not 0 <= self.noise_tolerance < 1:
            raise ConfigError("analysis.noise_tolerance", self.noise_tolerance, "use a share in [0, 1)")


@dataclass
class RootConfig:
    # MISSING (not a default instance): a default instance would run __post_init__ on placeholder values
    # and freeze derived fields (kv_heads, ffn_hidden) before the model file is merged in.
    model: ModelConfig = MISSING
    cluster: ClusterConfig = MISSING
    backend: BackendConfig = field(default_factory=BackendConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    grid: GridConfig = field(default_factory=GridConfig)
    plan: PlanConfig = field(default_factory=PlanConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    sweep: SweepRunConfig = field(default_factory=SweepRunConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    dry_run: bool = False
    """Plan only: print the ranked table and write plan.csv, submit nothing."""


def register_configs() -> None:
    """Register the schema so that conf/config.yaml can extend it (`defaults: [base_config, ...]`)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RootConfig)
