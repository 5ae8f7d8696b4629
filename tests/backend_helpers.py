"""Helpers for the backend tests: reference configs, golden files, running a rendered script with bash.

run_script puts a fake `scontrol` (hosts node-a, node-b) on PATH; fake_python is an interpreter that records the
argv it receives (NUL-separated, so newlines in values survive) instead of starting anything.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import fields, replace
from pathlib import Path

from launcher.backends import LaunchSpec, render_launch
from launcher.config.schema import BackendConfig, ClusterConfig, MegatronConfig, ModelConfig
from launcher.core.layout import Layout

GOLDEN = Path(__file__).parent / "golden"
# Shell metacharacters that must reach the program as text. Harmless if they ever ran (they only create pwned*
# files in the test's folder), because a broken quoting must not run a destructive command on a developer's box.
NASTY = ["; touch pwned1", "$(touch pwned2)", "`touch pwned3`", "&& touch pwned4 #", "a'b\"c", "two\nlines", "*",
         "$HOME", ""]


def backend_config(name: str, **settings) -> BackendConfig:
    """A BackendConfig from flat keyword settings: the keys of backend.megatron (path, data_path, tokenizer_type,
    ...) go into that section, the others are top-level fields."""
    megatron_keys = {f.name for f in fields(MegatronConfig)}
    megatron = MegatronConfig(**{k: v for k, v in settings.items() if k in megatron_keys})
    return BackendConfig(name=name, megatron=megatron, **{k: v for k, v in settings.items() if k not in megatron_keys})


def changed(backend: BackendConfig, **changes) -> BackendConfig:
    """`backend` with flat changes applied (backend.megatron keys routed into their section)."""
    megatron_keys = {f.name for f in fields(MegatronConfig)}
    megatron = replace(backend.megatron, **{k: v for k, v in changes.items() if k in megatron_keys})
    return replace(backend, megatron=megatron, **{k: v for k, v in changes.items() if k not in megatron_keys})


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PARASWEEP_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing {path}: run with PARASWEEP_UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name} changed: review, then regenerate with PARASWEEP_UPDATE_GOLDEN=1"


def llama2_70b() -> ModelConfig:
    # conf/model/llama2-70b.yaml, spelled out so that the golden files do not move with the config tree.
    return ModelConfig(name="llama2-70b", layers=80, hidden=8192, heads=64, kv_heads=8, swiglu=True,
                       ffn_hidden=28672, seq_len=4096, vocab=32000, tied_embeddings=False, norm="rmsnorm")


def a100_80g() -> ClusterConfig:
    return ClusterConfig(name="a100-80g", gpu="A100-SXM4-80GB", gpu_mem_gb=80, peak_tflops=312, gpus_per_node=8,
                         nodes=32)


def golden_layout(**changes) -> Layout:
    base = Layout(gpus=64, nodes=8, tp=8, pp=4, dp=2, vpp=2, mbs=1, gbs=1024, recompute="selective",
                  sequence_parallel=True, zero_stage=0, distributed_optimizer=True)
    return replace(base, **changes)


def tiny() -> ModelConfig:
    return ModelConfig(name="tiny", layers=4, hidden=256, heads=4, seq_len=128, vocab=1024)


def cpu() -> ClusterConfig:
    return ClusterConfig(name="local-cpu", gpu="cpu", gpu_mem_gb=0.5, peak_tflops=0.1, gpus_per_node=8)


def run_script(script: str, tmp: Path, *, slurm: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a rendered script with bash in `tmp`; fake `scontrol` (two hosts) is on PATH."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    scontrol = bindir / "scontrol"
    scontrol.write_text("#!/bin/sh\nprintf 'node-a\\nnode-b\\n'\n")
    scontrol.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MASTER_"))}
    env.update({"PATH": f"{bindir}:{env['PATH']}", "ARGV_OUT": str(tmp / "argv.bin"), "HOME": str(tmp)},
               **(slurm or {}))
    return subprocess.run(["bash", "-c", script], cwd=tmp, env=env, capture_output=True, text=True, timeout=60)


def fake_python(tmp: Path) -> str:
    """An interpreter that records its argv; `-c` snippets (free-port lookup) run in the real python3."""
    path = tmp / "fake python; $(touch pwned0)"
    path.write_text('#!/bin/sh\nif [ "$1" = "-c" ]; then exec python3 "$@"; fi\nprintf \'%s\\0\' "$@" > "$ARGV_OUT"\n')
    path.chmod(0o755)
    return str(path)


def received_argv(tmp: Path) -> list[str]:
    return (tmp / "argv.bin").read_text().split("\0")[:-1]


def workload_spec(tmp: Path, layout: Layout, **backend_changes) -> LaunchSpec:
    (tmp / "trial").mkdir(exist_ok=True)  # the lead creates the trial folder before the job starts
    backend = BackendConfig(name="torch", precision="fp32", python=fake_python(tmp), **backend_changes)
    # a multi-node layout is run on whole nodes of its size (the rules refuse partial nodes)
    cluster = cpu() if layout.nodes == 1 else replace(cpu(), gpus_per_node=layout.gpus_per_node)
    return render_launch(tiny(), cluster, backend, layout, trial_dir=str(tmp / "trial"), mem_limit_mb=500)


SLURM_RANK1 = {"SLURM_JOB_NODELIST": "node-[a-b]", "SLURM_PROCID": "1", "SLURM_NNODES": "2", "SLURM_JOB_ID": "123456"}
PORT_123456 = str(20000 + 123456 % 20000)  # 23456


def assert_real_flags(argv: list[str], section: str) -> None:
    """Every --flag in argv is in megatron_flags.txt's section, and a flag with fixed choices got one of them."""
    from launcher.backends.megatron_common import known_flags

    known = known_flags(section)
    for i, token in enumerate(argv):
        if token.startswith("--"):
            assert token in known, f"{token} is not a {section} flag"
            if known[token] is not None:
                assert argv[i + 1] in known[token], f"{token} {argv[i + 1]}"
