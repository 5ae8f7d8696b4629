"""The config schema: pure, frozen, keyword-only dataclasses with a docstring per field, registered in Hydra's
ConfigStore (register_configs) and turned into objects once, at load (launcher.config.load).

Pure data: nothing here reads a file or checks a value. The value checks live in launcher.config.checks and run
right after loading; a Hugging Face config.json is read by launcher.config.load before the model section becomes
a ModelConfig. The one thing __post_init__ does is fill the fields whose default follows from others (kv_heads,
ffn_hidden, max_position). Closed choices are enums (launcher.core.names, launcher.core.objective) whose members
are spelled like their values, which is how OmegaConf matches a config string to a member.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from launcher.core.layout import DIMENSIONS, WORLD, dimension, grid_defaults
from launcher.core.names import BackendName, ExecutorKind, Precision, PrecisionSetting
from launcher.core.objective import Objective

PRECISIONS: tuple[str, ...] = tuple(p.value for p in Precision)
BACKENDS: tuple[str, ...] = tuple(b.value for b in BackendName)
EXECUTORS: tuple[str, ...] = tuple(e.value for e in ExecutorKind)
TRANSFORMER_IMPLS = ("transformer_engine", "local")
LAUNCHERS = ("torchrun", "deepspeed")
MODEL_TOKENIZERS = ("", "gpt2", "sentencepiece", "huggingface")
NORMS = ("layernorm", "rmsnorm")
MAX_SWEEP_NAME_CHARS = 100
MISSING: Any = "???"
"""OmegaConf's marker of a value the config must still give (omegaconf.MISSING is this string; importing omegaconf
here would slow every command line's start, --help included)."""


class Sealed:
    """Frozen once made: assigning a field of a config object raises FrozenInstanceError (change a config with
    dataclasses.replace, which makes a new one).

    Not dataclass(frozen=True): OmegaConf marks the node of a frozen dataclass read-only, and Hydra then cannot
    compose the chosen model/cluster files into it. Sealing after __init__ gives the objects the same guarantee."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_sealed"):
            raise FrozenInstanceError(f"cannot assign to field {name!r}: use dataclasses.replace")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass(kw_only=True)
class ModelConfig(Sealed):
    name: str = "???"
    """Registry name, e.g. 'llama2-70b' (the file name under conf/model/)."""
    layers: int = 1
    """Transformer layers L."""
    hidden: int = 64
    """Hidden size h."""
    heads: int = 1
    """Attention heads a."""
    kv_heads: int = 0
    """Key/value heads for GQA/MQA (0, the default: = heads, plain multi-head attention)."""
    ffn_hidden: int = 0
    """FFN inner size (0, the default: 4*h, or the Llama SwiGLU size 2/3*4h rounded up to 256 when swiglu)."""
    swiglu: bool = False
    """Gated SwiGLU FFN (three FFN matrices instead of two)."""
    seq_len: int = 2048
    """Training sequence length s."""
    max_position: int = 0
    """Maximum position embeddings (0, the default: = seq_len)."""
    vocab: int = 51200
    """Vocabulary size V before padding."""
    tied_embeddings: bool = True
    """Input embedding and output layer share weights (GPT); Llama unties them."""
    norm: str = "layernorm"
    """'layernorm' or 'rmsnorm'."""
    num_experts: int = 0
    """Routed experts per layer (0, the default: a dense model). Every layer's FFN is then a mixture-of-experts
    block (Megatron --num-experts with --moe-layer-freq 1; launcher.plan.moe prices it)."""
    moe_topk: int = 2
    """Experts each token is routed to (Megatron --moe-router-topk); read only when num_experts > 0."""
    moe_ffn_hidden: int = 0
    """Each routed expert's FFN size (0, the default: = ffn_hidden; Megatron --moe-ffn-hidden-size)."""
    shared_expert_ffn_hidden: int = 0
    """The shared expert's FFN size, one FFN every token goes through besides its routed experts (0: none; Qwen-MoE,
    DeepSeek; Megatron --moe-shared-expert-intermediate-size)."""
    moe_aux_loss_coeff: float = 0.0
    """Load-balancing loss coefficient (Megatron --moe-aux-loss-coeff; 0: none)."""
    source: str = ""
    """Where the shape comes from (paper, model card)."""
    tokenizer: str = ""
    """The tokenizer the model was trained with, which Megatron must load: 'gpt2' (BPE vocab + merges files),
    'sentencepiece' (a tokenizer.model: Llama 1/2, Mistral), 'huggingface' (Llama 3, Qwen2) or '' (not said: set
    backend.megatron.tokenizer_type yourself). The Megatron backends pick their --tokenizer-type from it."""
    hf_config: str = ""
    """A Hugging Face config.json (or the folder holding it) to read the shape from (model=hf): layers, hidden,
    heads, kv_heads, ffn_hidden, swiglu, vocab, max_position, tied_embeddings and norm come from the file (read by
    launcher.config.load before this object is made)."""

    def __post_init__(self) -> None:
        """The fields whose default follows from others (0 or None: derived; frozen: set once, here)."""
        if not self.kv_heads:
            object.__setattr__(self, "kv_heads", self.heads)
        if not self.ffn_hidden:
            object.__setattr__(self, "ffn_hidden", swiglu_ffn(self.hidden) if self.swiglu else 4 * self.hidden)
        if not self.max_position:
            object.__setattr__(self, "max_position", self.seq_len)
        if self.num_experts and not self.moe_ffn_hidden:
            object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
        super().__post_init__()

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        """Every layer's FFN is a mixture of experts (num_experts > 0)."""
        return self.num_experts > 0


def swiglu_ffn(hidden: int, multiple_of: int = 256) -> int:
    """Llama's SwiGLU FFN size: 2/3 of 4h, rounded up to a multiple of 256 (Touvron et al. 2023, model.py)."""
    raw = int(2 * 4 * hidden / 3)
    return multiple_of * ((raw + multiple_of - 1) // multiple_of)


@dataclass(kw_only=True)
class ClusterConfig(Sealed):
    name: str = "???"
    """Preset name (file under conf/cluster/)."""
    gpu: str = "???"
    """Accelerator model, for people reading the plan."""
    gpu_mem_gb: float = 80.0
    """Device memory per GPU as a process can address it, GB (1e9 bytes): nvidia-smi's total, e.g. 81920 MiB =
    85.9 GB on an "80 GB" A100 (the marketing figure is the GiB count)."""
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
    intra_node_all_to_all_gbytes_per_s: float = 0.0
    """Measured all-to-all bus bandwidth inside a node, GB/s (launcher.netbench; 0: not measured, the MoE dispatch
    is priced at intra_node_gbytes_per_s x net_eff)."""
    inter_node_all_to_all_gbytes_per_s: float = 0.0
    """Measured all-to-all bus bandwidth across nodes, GB/s (0: not measured, inter_node_gbytes_per_s x net_eff)."""
    source: str = ""
    """Where the numbers come from (datasheet)."""


@dataclass(kw_only=True)
class MegatronConfig(Sealed):
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


@dataclass(kw_only=True)
class BackendConfig(Sealed):
    """The program a trial runs and how long it measures. Program-specific settings live in their own section."""

    name: BackendName = BackendName.torch
    """Which program runs a trial: 'torch' (embedded GPT), 'megatron_deepspeed' or 'megatron_lm'."""
    precision: PrecisionSetting = PrecisionSetting.bf16
    """'bf16' or 'fp16' mixed precision, 'fp32', 'fp8', or 'auto': what the hardware does well (bf16 on GPU clusters,
    fp32 on the CPU stand-in), resolved when the config is loaded. 'fp8' is Transformer Engine's FP8 (the GEMMs in
    FP8 with delayed scaling, hybrid E4M3 forward / E5M2 gradients, over bf16 weights): backend megatron_lm with
    megatron.transformer_impl=transformer_engine, on a GPU with FP8 tensor cores (H100, H200, B200, GB200)."""
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


@dataclass(kw_only=True)
class ExecutorConfig(Sealed):
    name: ExecutorKind = ExecutorKind.local
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
    detach_on_term: bool = False
    """SLURM: on SIGTERM or SIGHUP, leave the sweep's jobs running (the next run of the same command re-attaches to
    them) instead of cancelling them. For a launcher that runs inside a SLURM job or under `timeout`. Local trials
    are always stopped with the launcher (nothing would watch them)."""


def _list_of(values: list[Any]) -> Any:
    """A default_factory making a fresh copy of `values` for each GridConfig."""
    frozen = tuple(values)
    return lambda: list(frozen)


def _grid_config_class() -> type:
    """GridConfig, generated from the Layout's fields: one list per dimension (`nodes` or `gpus` for the world;
    a dimension without a grid default, dp, is derived when left None), plus zip / include / exclude."""
    lists = {int: List[int], str: List[str], bool: List[bool]}
    specs: list[tuple] = [(name, Optional[List[int]], field(default=None)) for name in reversed(WORLD)]
    for name, default in grid_defaults():
        kind = lists[dimension(name).type]
        if default is None:
            specs.append((name, Optional[kind], field(default=None)))
        else:
            specs.append((name, kind, field(default_factory=_list_of(default))))
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
    return make_dataclass("GridConfig", specs, bases=(Sealed,), namespace={"__doc__": doc, "__module__": __name__},
                          kw_only=True)


if TYPE_CHECKING:  # generated from the Layout: a static type checker sees its lists as Any
    GridConfig = Any
else:
    GridConfig = _grid_config_class()


@dataclass(kw_only=True)
class PlanConfig(Sealed):
    mem_safety_margin: float = 0.9
    """Where 'predicted to fit' ends, as a share of device memory. A configuration predicted above it is kept as
    'band' (uncertain: run after the others, smallest predicted peak first) while the lower end of its peak's 90 %
    interval is within the device's memory, and pruned (predicted_oom) only when that lower end is over it; the same
    rule prunes (calibrated_oom) and brings back planner-pruned configurations after each calibration refit
    (launcher.plan.band)."""
    keep_borderline: float = 0.0
    """Also keep configurations whose whole interval is over the device's memory when their predicted peak is within
    this much (share of capacity) above mem_safety_margin ('borderline': e.g. to see a real OOM)."""
    max_trials: int = 0
    """Trial budget (0: run every valid configuration)."""
    max_gpu_hours: float = 0.0
    """GPU-hour budget of the sweep (0: none). The dry run prints the expected cost of the exhaustive plan and of the
    adaptive search against it; a run submits no trial whose predicted cost would take the GPU-hours spent (running
    trials counted at their predicted length) over it, and once nothing runs it prunes the rest ('gpu_budget', said
    in one message). Raising it and running the same command resumes them."""
    exploration_share: float = 0.25
    """Share of the budget given to configurations outside the predicted top, to check the ranking itself."""
    allow_tp_across_nodes: bool = False
    """Allow tensor parallelism to span nodes (slow: TP traffic on the inter-node link)."""
    seed: int = 0
    """Seed for picking the exploration share."""
    objective: Objective = Objective.tokens_per_s
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
    compute_probe: Optional[bool] = None
    """Measure the GPU before the trials (python -m launcher.computebench as one job on one GPU: the plan's GEMMs at
    its tp values and micro-batch sizes, and one transformer layer's forward + backward) and plan with the measured
    GEMM efficiency instead of the a-priori one (launcher.run.compute). null (default): on the SLURM executor yes;
    on the local one on a GPU, not on the CPU stand-in. Reused on resume and by later sweeps of the same cluster and
    GPU in the same precision, unless sweep.fresh."""
    prior_from: Any = ""
    """Finished sweeps whose calibration.json starts this sweep's calibration (launcher.run.prior): one sweep's
    folder (e.g. sweeps/llama-16gpu: its fitted constants and their uncertainty become the prior,
    launcher.plan.calibrate.Prior.from_json), a list of them ([sweeps/a,sweeps/b]) or a folder of sweeps (sweeps/:
    every finished sweep there of this setup; others are skipped with a note), pooled (launcher.plan.pooling). A
    sweep named must be of the same cluster, GPU, backend and precision. A string or a list of strings (Any:
    OmegaConf 2.3 has no union of the two); '' = the backend's a-priori constants."""
    stop_when_converged: bool = False
    """End the sweep when the calibrated model gives no unrun trial a real chance (launcher.run.scheduler's
    stop_rule) to beat the best by more than analysis.noise_tolerance: the remaining planned trials are pruned as
    'converged', each with its reason. plan.max_trials stays a hard cap either way."""


@dataclass(kw_only=True)
class RetryConfig(Sealed):
    max_attempts: int = 2
    """Attempts per trial for retryable failures (node failure, comm error, preemption, cancel, timeout)."""


@dataclass(kw_only=True)
class MonitorConfig(Sealed):
    poll_interval_s: float = 2.0
    """Seconds between two polls of all live jobs (one sacct call per poll on SLURM)."""
    hang_timeout_min: float = 5.0
    """A trial with no new iteration for this long is a hang: cancelled and retried once."""


@dataclass(kw_only=True)
class TrackingConfig(Sealed):
    uri: str = "sqlite:///mlflow.db"
    """MLflow tracking URI (sqlite file, or http://host:port of a tracking server)."""
    experiment: str = ""
    """Experiment name ('' = the sweep name)."""
    ui_url: str = "http://127.0.0.1:5000"
    """Where people open the MLflow UI (for the printed link, when the URI is not http)."""
    enabled: bool = True


@dataclass(kw_only=True)
class SweepRunConfig(Sealed):
    name: str = "tiny"
    """Sweep name: the folder sweeps/<name>/ and the MLflow experiment."""
    root_dir: str = "sweeps"
    """Where sweep folders live (relative to the working directory)."""
    fresh: bool = False
    """Start a new folder (the old one is kept under a dated name) instead of resuming."""


@dataclass(kw_only=True)
class AnalysisConfig(Sealed):
    confirm_top: int = 3
    """After the search, up to this many finalists (the best ok trials within the noise of the best: the tolerance
    plus the largest spread the repeats have shown) are measured again until each has `repeats` measurements; the
    winner is chosen on the medians and stated with its margin and spread, or as tied within noise. 0: the winner is
    a single measurement."""
    repeats: int = 2
    """Measurements of each finalist (at least 2 with confirm_top > 0); repeats run on other nodes when the cluster
    has room, and the ranking uses their median and reports the spread ((max - min) / median)."""
    noise_tolerance: float = 0.02
    """Throughputs within this share of each other, plus their measured spread, tie; the tie is broken by memory
    headroom."""


@dataclass(kw_only=True)
class RootConfig(Sealed):
    # MISSING (not a default instance): a default instance would fill the derived fields (kv_heads, ffn_hidden)
    # from placeholder values before the model file is merged in.
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
