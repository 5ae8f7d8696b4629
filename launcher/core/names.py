"""The small closed vocabularies of a sweep's configuration, as str-valued enums: which program runs a trial
(BackendName), how trials are started (ExecutorKind), the training precision (Precision), and the one test for the
CPU stand-in cluster.

Why str enums: a member equals its text (`BackendName.torch == "torch"`), so the ledger, MLflow params, config.yaml
files and older sweep folders keep working unchanged; `str()`, f-strings and json give the plain value. Members are
spelled like their values because OmegaConf maps a config string to an enum member by name.
"""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """A str Enum whose str(), format() and f-strings are its value (Python 3.10 has no enum.StrEnum)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class BackendName(StrEnum):
    """The program a trial runs (launcher.backends registers one Backend per member)."""

    torch = "torch"
    """The embedded GPT workload (launcher/workload)."""
    megatron_deepspeed = "megatron_deepspeed"
    megatron_lm = "megatron_lm"


class ExecutorKind(StrEnum):
    """How trials are started: local processes or SLURM job arrays."""

    local = "local"
    slurm = "slurm"


class Precision(StrEnum):
    """The precision a trial trains in."""

    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"
    fp8 = "fp8"
    """Transformer Engine FP8 GEMMs (delayed scaling, hybrid E4M3/E5M2) over bf16 weights and activations: Megatron-LM
    with transformer_impl=transformer_engine on GPUs with FP8 tensor cores (Hopper, Blackwell)."""


class PrecisionSetting(StrEnum):
    """What backend.precision may say: a Precision, or `auto` (resolved at load: bf16 on GPUs, fp32 on the CPU
    stand-in; resolve_precision; `auto` never picks fp8, which changes the numerics)."""

    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"
    fp8 = "fp8"
    auto = "auto"


CPU_STANDIN_GPU = "cpu"
"""cluster.gpu of the local CPU stand-in (conf/cluster/local-cpu.yaml), where every rank is a process."""


def is_cpu_standin(gpu: str) -> bool:
    """Is a cluster whose `gpu` field says this the CPU stand-in? (case and spaces do not matter)."""
    return str(gpu).strip().lower() == CPU_STANDIN_GPU


def resolve_precision(setting: PrecisionSetting | str, gpu: str) -> Precision:
    """The precision a trial trains in: as configured, or for `auto` what the hardware does well: bf16 on GPU
    clusters (tensor cores; fp32 would run on the CUDA cores at 1/15 of the speed), fp32 on the CPU stand-in (CPU
    matmuls have no fast 16-bit path here, and gloo reduces fp32). Raises ValueError for another setting."""
    setting = PrecisionSetting(setting)
    if setting is PrecisionSetting.auto:
        return Precision.fp32 if is_cpu_standin(gpu) else Precision.bf16
    return Precision(setting.value)
