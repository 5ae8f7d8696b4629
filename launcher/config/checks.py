"""Every value check of a config, run once right after loading (launcher.config.load), so that nothing reaches a
shell, an #SBATCH header, the filesystem or a report unchecked, and every mistake is one message naming the field,
the value and the fix (exit code 2; the messages about files and Hydra's errors are launcher.config.messages').

Per section (check_model, check_cluster, ... in the schema's order: the first problem is the one reported), then
generic checks that follow the schema as it grows: they walk the dataclass fields of the loaded RootConfig
(nested sections, lists and dicts included) instead of naming fields one by one.
- Every string (values, list items, dict keys and values) is one line: no newline, carriage return or NUL. A value
  lands in an `#SBATCH` line, a `srun` line or a generated script, where a newline starts a command (submitit
  writes `#SBATCH --account=VALUE` as is). Everything else in the generated scripts is shell-quoted
  (launcher/backends/launch.py, analysis/report/export.py); `executor.setup` lines are shell code by design.
- Dict keys follow the rule of what they become: `executor.env` keys are environment variable names
  (`export NAME=...`), `executor.sbatch_args` keys are sbatch option names (`#SBATCH --NAME=...`), any other dict
  key is a plain name.
- Every float is finite (`nan` would switch hang detection off, `inf` would never fire).
- No key the schema does not know: Hydra's append syntax (`+grid.tpp=[1,2]`) adds keys to a structured config
  without complaint, and the dataclass conversion silently drops them. Only `+sweep=NAME` takes a plus.
- The config files themselves: YAML syntax errors, tabs, duplicate keys and non-UTF-8 bytes are reported with the
  file and line; a sweep file without `# @package _global_` is named (launcher.config.messages).
- The run environment (`check_environment`, not part of loading, so that tests can load any config): the sweep
  folder can be created and written, and `executor=slurm` finds SLURM's commands.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

from launcher.config import messages
from launcher.config.schema import (
    BACKENDS,
    EXECUTORS,
    LAUNCHERS,
    MAX_SWEEP_NAME_CHARS,
    MODEL_TOKENIZERS,
    NORMS,
    PRECISIONS,
    TRANSFORMER_IMPLS,
    AnalysisConfig,
    BackendConfig,
    ClusterConfig,
    ExecutorConfig,
    GridConfig,
    MegatronConfig,
    ModelConfig,
    MonitorConfig,
    PlanConfig,
    RetryConfig,
    RootConfig,
    SweepRunConfig,
    TrackingConfig,
)
from launcher.core.errors import ConfigError
from launcher.core.layout import DIMENSIONS, Dimension
from launcher.core.names import BackendName, ExecutorKind
from launcher.core.objective import OBJECTIVES, Objective

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SBATCH_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
KEY_RULES = {
    "executor.env": (ENV_NAME, "an environment variable name (letters, digits, '_'; not starting with a digit)"),
    "executor.sbatch_args": (SBATCH_OPTION, "an sbatch option name without dashes, e.g. mail-type"),
}
SHELL_CODE_FIELDS = ("executor.setup",)
"""Fields whose lines are shell code by design (module load, venv activation): one line each, run as written."""
FORBIDDEN_CHARS = {"\n": "a newline", "\r": "a carriage return", "\0": "a NUL byte"}
MAX_VALUE_CHARS = 4096
SLURM_COMMANDS = ("sbatch", "sacct", "scancel")
"""What the launcher itself runs for executor=slurm (scontrol runs in the job, on the nodes)."""


# -- the loaded config ---------------------------------------------------------------------------------------------
def walk(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any, Optional[str]]]:
    """(field path, value, dict-key-of) for every leaf of a dataclass tree; dict keys come as their own leaves
    (third item = the dict's path), list items as path[i]."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from walk(getattr(obj, f.name), f"{prefix}.{f.name}" if prefix else f.name)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield f"{prefix}[{key!r}]", key, prefix
            yield from walk(value, f"{prefix}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from walk(item, f"{prefix}[{i}]")
    else:
        yield prefix, obj, None


def check_values(cfg: Any) -> None:
    """Every string one line, every dict key a valid name, every float finite (ConfigError naming the field)."""
    for path, value, key_of in walk(cfg):
        if key_of is not None:
            _check_key(key_of, value)
        if isinstance(value, str):
            _check_string(path, value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(path, value, "use a finite number")


def _check_string(path: str, value: str) -> None:
    for char, name in FORBIDDEN_CHARS.items():
        if char in value:
            where = "one shell line each" if _base(path) in SHELL_CODE_FIELDS else "one line"
            raise ConfigError(path, value, f"contains {name}: values must be {where} (they end up in #SBATCH lines "
                              "and generated scripts)")
    if len(value) > MAX_VALUE_CHARS:
        raise ConfigError(path, value[:40] + "...", f"is {len(value)} characters long: use at most {MAX_VALUE_CHARS}")


def _check_key(dict_path: str, key: Any) -> None:
    pattern, what = KEY_RULES.get(_base(dict_path), (PLAIN_KEY, "a plain name (letters, digits, '_', '.', '-')"))
    if not isinstance(key, str) or not pattern.fullmatch(key):
        raise ConfigError(f"{dict_path}[{key!r}]", key, f"this key must be {what}")


def _base(path: str) -> str:
    """executor.setup[2] -> executor.setup; grid.include[0].tp -> grid.include.tp."""
    return re.sub(r"\[[^\]]*\]", "", path)


# -- the values of each section (run right after loading, in the sections' order) ------------------------------------
def _positive(section: str, name: str, value: float | int | None, fix: str = "use a number > 0") -> None:
    if value is not None and value <= 0:
        raise ConfigError(f"{section}.{name}", value, fix)


def check_model(model: ModelConfig) -> None:
    """The values of the model section."""
    for name in ("layers", "hidden", "heads", "seq_len", "vocab"):
        _positive("model", name, getattr(model, name), "use a positive integer")
    _positive("model", "kv_heads", model.kv_heads, "use a positive integer (or leave it unset for MHA)")
    if model.heads % model.kv_heads:
        raise ConfigError("model.kv_heads", model.kv_heads, f"heads ({model.heads}) must be divisible by kv_heads")
    _positive("model", "ffn_hidden", model.ffn_hidden, "use a positive integer")
    if model.tokenizer not in MODEL_TOKENIZERS:
        raise ConfigError("model.tokenizer", model.tokenizer, f"use one of {', '.join(MODEL_TOKENIZERS[1:])} (or "
                          "leave it empty)")
    if model.norm not in NORMS:
        raise ConfigError("model.norm", model.norm, "use 'layernorm' or 'rmsnorm'")
    check_experts(model)


MOE_FIELDS = ("moe_ffn_hidden", "shared_expert_ffn_hidden", "moe_aux_loss_coeff")
"""Model fields that configure MoE layers: set on a dense model (num_experts 0) they would be ignored."""


def check_experts(model: ModelConfig) -> None:
    """The mixture-of-experts fields: all off for a dense model, consistent for an MoE one."""
    if model.num_experts < 0:
        raise ConfigError("model.num_experts", model.num_experts, "use 0 (dense) or the number of routed experts")
    if not model.num_experts:
        for name in MOE_FIELDS:
            if getattr(model, name):
                raise ConfigError(f"model.{name}", getattr(model, name), "configures MoE layers but "
                                  "model.num_experts is 0 (dense): set model.num_experts or leave it unset")
        return
    if not 1 <= model.moe_topk <= model.num_experts:
        raise ConfigError("model.moe_topk", model.moe_topk, f"use 1 to num_experts ({model.num_experts}): the "
                          "experts each token is routed to")
    _positive("model", "moe_ffn_hidden", model.moe_ffn_hidden, "use a positive integer (or leave it unset: "
              "= ffn_hidden)")
    for name in ("shared_expert_ffn_hidden", "moe_aux_loss_coeff"):
        if getattr(model, name) < 0:
            raise ConfigError(f"model.{name}", getattr(model, name), "use 0 (none) or a positive value")


def check_cluster(cluster: ClusterConfig) -> None:
    """The values of the cluster section."""
    for name in ("gpu_mem_gb", "peak_tflops", "gpus_per_node", "intra_node_gbytes_per_s",
                 "inter_node_gbytes_per_s", "hbm_gbytes_per_s", "nodes"):
        _positive("cluster", name, getattr(cluster, name))
    for name in ("intra_node_all_to_all_gbytes_per_s", "inter_node_all_to_all_gbytes_per_s"):
        if getattr(cluster, name) < 0:
            raise ConfigError(f"cluster.{name}", getattr(cluster, name), "use 0 (not measured) or the measured GB/s")


def check_megatron(megatron: MegatronConfig) -> None:
    """The values of the megatron section."""
    if megatron.transformer_impl not in TRANSFORMER_IMPLS:
        raise ConfigError("backend.megatron.transformer_impl", megatron.transformer_impl,
                          f"use one of {', '.join(TRANSFORMER_IMPLS)}")


def check_backend(backend: BackendConfig) -> None:
    """The values of the backend section."""
    if backend.name not in BACKENDS:
        raise ConfigError("backend.name", backend.name, f"use one of {', '.join(BACKENDS)}")
    if backend.precision not in PRECISIONS + ("auto",):
        raise ConfigError("backend.precision", backend.precision, f"use one of {', '.join(PRECISIONS)} or auto "
                          "(bf16 on GPU clusters, fp32 on the CPU stand-in)")
    if backend.launcher not in LAUNCHERS:
        raise ConfigError("backend.launcher", backend.launcher, "use 'torchrun' or 'deepspeed'")
    if backend.precision == "fp8":
        check_fp8(backend)
    _positive("backend", "measure_iters", backend.measure_iters, "use at least 1")
    if backend.warmup_iters < 0:
        raise ConfigError("backend.warmup_iters", backend.warmup_iters, "use 0 or more")


def check_fp8(backend: BackendConfig) -> None:
    """FP8 runs through Transformer Engine in Megatron-LM only (the GPU's FP8 tensor cores are checked by the plan,
    which knows the hardware: launcher.plan.hardware.check_precision)."""
    name = BackendName(backend.name)
    if name is BackendName.megatron_deepspeed:
        raise ConfigError("backend.precision", "fp8", "Megatron-DeepSpeed's FP8 (--fp8-hybrid) runs only through its "
                          "--transformer-impl transformer_engine path (megatron/arguments.py asserts it), which this "
                          "backend does not render: use backend=megatron_lm for FP8, or precision bf16")
    if name is BackendName.torch:
        raise ConfigError("backend.precision", "fp8", "the embedded workload has no FP8 GEMMs (torch's scaled_mm "
                          "needs FP8 tensor cores and Transformer Engine's recipes; on the CPU stand-in there are "
                          "none): use backend=megatron_lm for FP8, or precision bf16/auto")
    if backend.megatron.transformer_impl != "transformer_engine":
        raise ConfigError("backend.megatron.transformer_impl", backend.megatron.transformer_impl, "precision fp8 runs "
                          "its GEMMs through Transformer Engine (megatron-core fp8_utils: fp8_autocast; the local "
                          "transformer's torch Linear layers would run bf16 under an fp8 label): set "
                          "backend.megatron.transformer_impl=transformer_engine, or precision bf16")


def check_executor(executor: ExecutorConfig) -> None:
    """The values of the executor section."""
    if executor.name not in EXECUTORS:
        raise ConfigError("executor.name", executor.name, f"use one of {', '.join(EXECUTORS)}")
    _positive("executor", "timeout_min", executor.timeout_min, "use a positive number of minutes")
    if executor.max_concurrent < 0:
        raise ConfigError("executor.max_concurrent", executor.max_concurrent, "use 0 (automatic) or more")
    for name in ("signal_delay_s", "cpus_per_task", "mem_gb"):
        if getattr(executor, name) < 0:
            raise ConfigError(f"executor.{name}", getattr(executor, name), "use 0 or more")
    if executor.detach_on_term and executor.name is not ExecutorKind.slurm:
        raise ConfigError("executor.detach_on_term", True, "only SLURM jobs can be left running when the launcher is "
                          "terminated (local trials would run unwatched): use executor=slurm, or "
                          "executor.detach_on_term=false")


def check_plan(plan: PlanConfig) -> None:
    """The values of the plan section."""
    _positive("plan", "max_grid_points", plan.max_grid_points, "use a positive number of grid points")
    if plan.objective not in OBJECTIVES:
        raise ConfigError("plan.objective", plan.objective, f"use one of {', '.join(OBJECTIVES)}")
    if Objective(plan.objective).needs_target and not 0 < plan.target_tokens < float("inf"):
        raise ConfigError("plan.target_tokens", plan.target_tokens, "objective=time_to_target needs the tokens "
                          "to train, e.g. plan.target_tokens=2e12")
    if not 0 < plan.mem_safety_margin <= 1:
        raise ConfigError("plan.mem_safety_margin", plan.mem_safety_margin, "use a share in (0, 1]")
    if not 0 <= plan.exploration_share < 1:
        raise ConfigError("plan.exploration_share", plan.exploration_share, "use a share in [0, 1)")
    if plan.max_trials < 0:
        raise ConfigError("plan.max_trials", plan.max_trials, "use 0 (no budget) or more")
    if plan.keep_borderline < 0:
        raise ConfigError("plan.keep_borderline", plan.keep_borderline, "use 0 (prune at the margin) or more")
    if plan.max_gpu_hours < 0:
        raise ConfigError("plan.max_gpu_hours", plan.max_gpu_hours, "use 0 (no budget) or a number of GPU-hours; "
                          "the dry run prints what the plan is expected to cost")
    check_prior_from(plan.prior_from)
    if plan.early_stop_min_iters < 2:  # one step has no spread: a single slow step would stop a trial
        raise ConfigError("plan.early_stop_min_iters", plan.early_stop_min_iters, "use 2 or more measured "
                          "iterations (or plan.early_stop=false to never stop a trial early)")


def check_prior_from(value: object) -> None:
    """plan.prior_from: a string or a list of non-empty strings, each named once (the folders are read when the
    sweep starts, launcher.run.prior)."""
    if isinstance(value, str):
        return
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError("plan.prior_from", value, "use a finished sweep's folder (plan.prior_from=sweeps/NAME), a "
                          "list of them (plan.prior_from=[sweeps/a,sweeps/b]) or a folder of sweeps "
                          "(plan.prior_from=sweeps/)")
    if len(set(value)) < len(value):
        raise ConfigError("plan.prior_from", value, "name each finished sweep once")


def check_retry(retry: RetryConfig) -> None:
    """The values of the retry section."""
    _positive("retry", "max_attempts", retry.max_attempts, "use 1 (no retries) or more")


def check_monitor(monitor: MonitorConfig) -> None:
    """The values of the monitor section."""
    _positive("monitor", "poll_interval_s", monitor.poll_interval_s, "use a positive number of seconds")
    _positive("monitor", "hang_timeout_min", monitor.hang_timeout_min, "use a positive number of minutes")


_PLAIN_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # a folder name that cannot lead out of its folder ('..' starts with '.')


def check_tracking(tracking: TrackingConfig) -> None:
    """The values of the tracking section."""
    # It becomes a clickable link in report.html: only a web address (no javascript:, data:, file: ...).
    if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", tracking.ui_url or ""):
        raise ConfigError("tracking.ui_url", tracking.ui_url, "use an http:// or https:// address of the MLflow UI")
    # It names the experiment's artifact folder (mlartifacts/<experiment>/ beside an sqlite store): a plain name,
    # so that '../../x', '/abs' or 'a/b' cannot put MLflow's files outside the project.
    if tracking.experiment and (not re.fullmatch(_PLAIN_NAME, tracking.experiment)
                                or len(tracking.experiment) > MAX_SWEEP_NAME_CHARS):
        raise ConfigError("tracking.experiment", tracking.experiment[:80],
                          f"use a plain name (letters, digits, '.', '_', '-'; at most {MAX_SWEEP_NAME_CHARS} "
                          "characters), or leave it empty for the sweep name")


def check_sweep(sweep: SweepRunConfig) -> None:
    """The values of the sweep section."""
    if not re.fullmatch(_PLAIN_NAME, sweep.name or ""):
        raise ConfigError("sweep.name", sweep.name, "use a folder name: letters, digits, '.', '_' or '-'")
    if len(sweep.name) > MAX_SWEEP_NAME_CHARS:  # a folder name, plus '.<date>-<time>' when sweep.fresh keeps it
        raise ConfigError("sweep.name", sweep.name[:40] + "...", f"is {len(sweep.name)} characters long: use at "
                          f"most {MAX_SWEEP_NAME_CHARS}")


def check_analysis(analysis: AnalysisConfig) -> None:
    """The values of the analysis section."""
    _positive("analysis", "repeats", analysis.repeats, "use 2 or more")
    if analysis.confirm_top < 0:
        raise ConfigError("analysis.confirm_top", analysis.confirm_top, "use 0 (no re-measurement) or more")
    if analysis.confirm_top and analysis.repeats < 2:
        raise ConfigError("analysis.repeats", analysis.repeats, f"a finalist (analysis.confirm_top="
                          f"{analysis.confirm_top}) needs at least 2 measurements to show its spread: use repeats "
                          ">= 2, or analysis.confirm_top=0 to rank on single measurements")
    if not 0 <= analysis.noise_tolerance < 1:
        raise ConfigError("analysis.noise_tolerance", analysis.noise_tolerance, "use a share in [0, 1)")


def check_grid(grid: GridConfig) -> None:
    """Every value of every list is one the Layout field accepts (launcher.core.layout.Dim: choices or integers
    >= 1)."""
    for d in DIMENSIONS:
        for value in getattr(grid, d.name, None) or []:
            check_dimension_value(d, value)


def check_dimension_value(d: Dimension, value: object) -> None:
    if d.dim.choices is not None:
        if value not in d.dim.choices:
            raise ConfigError(f"grid.{d.name}", value, f"use one of {', '.join(map(str, d.dim.choices))}")
    elif d.type is int and isinstance(value, int) and value < 1:
        raise ConfigError(f"grid.{d.name}", value, "use positive integers")


def check_config(cfg: RootConfig) -> None:
    """Every section's values, in the order of the schema (the first problem is the one reported), then the generic
    checks of every value (one-line strings, valid dict keys, finite floats)."""
    check_model(cfg.model)
    check_cluster(cfg.cluster)
    check_megatron(cfg.backend.megatron)
    check_backend(cfg.backend)
    check_executor(cfg.executor)
    check_grid(cfg.grid)
    check_plan(cfg.plan)
    check_retry(cfg.retry)
    check_monitor(cfg.monitor)
    check_tracking(cfg.tracking)
    check_sweep(cfg.sweep)
    check_analysis(cfg.analysis)
    check_values(cfg)


# -- the composed (not yet converted) config -----------------------------------------------------------------------
def check_known_keys(node: Any, schema: type, prefix: str = "") -> None:
    """Every key of the composed OmegaConf node is a field of its dataclass (recursing into nested sections)."""
    hints = typing.get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    for key in node:
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            raise messages.unknown_composed_key(path, str(key), names)
        sub = hints.get(key)
        if isinstance(sub, type) and dataclasses.is_dataclass(sub) and _is_mapping(node, key):
            check_known_keys(node[key], sub, path)


def _is_mapping(node: Any, key: str) -> bool:
    from omegaconf import DictConfig, OmegaConf

    return not OmegaConf.is_missing(node, key) and isinstance(node._get_node(key), DictConfig)


# -- the run environment -------------------------------------------------------------------------------------------
def check_environment(cfg: Any) -> None:
    """What must hold before a run or a dry run touches anything: a writable sweep folder; SLURM's commands."""
    check_writable_folder(Path(cfg.sweep.root_dir) / cfg.sweep.name, "sweep.root_dir", cfg.sweep.root_dir)
    if cfg.executor.name is ExecutorKind.slurm and not cfg.dry_run:
        missing = [cmd for cmd in SLURM_COMMANDS if shutil.which(cmd) is None]
        if missing:
            raise ConfigError("executor.name", "slurm", f"SLURM's {', '.join(missing)} not found on PATH: run on a "
                              "login node of the cluster (or load its slurm module), or use executor=local")


def check_writable_folder(folder: Path, field: str, value: str) -> None:
    """The folder exists and is writable, or can be created: tried for real (root ignores permission bits, a
    read-only mount or /proc do not show in them) with a probe directory that is removed at once."""
    if len(os.fsencode(folder.name)) > 200 or len(os.fsencode(str(folder.absolute()))) > 3000:
        raise ConfigError(field, value, f"{folder} is too long a path: use a shorter sweep.root_dir / sweep.name")
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(field, value, f"cannot create {folder}: {probe} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".parasweep-probe-", dir=probe))
    except OSError as exc:
        raise ConfigError(field, value, f"cannot write in {probe} ({exc.strerror}): pick a folder you can write "
                          "(sweep.root_dir=PATH)") from None


# -- storage failures mid-run ------------------------------------------------------------------------------------


