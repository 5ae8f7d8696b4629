"""No string reaches a shell or an #SBATCH header unchecked.

Every string, list-of-string and dict field of the schema (found by walking the dataclasses, so new fields are
covered without editing this test), and every dict key, is filled with hostile values; each config is loaded as
`python -m launcher` loads it, and every script the project writes is rendered and run with fake `python`, `srun`,
`sbatch` and `scontrol` on PATH: the trial's launch.sh (alone and as under SLURM), export/launch.sh and
export/train.sbatch, and the sbatch file submitit writes for executor=slurm. A value refused at load is safe (the
message must name the field); a value that loads must execute nothing: the file X never appears.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import subprocess
import typing
from pathlib import Path

import pytest

import launcher.config.load
from launcher.config.checks import SHELL_CODE_FIELDS
from launcher.config.schema import RootConfig
from launcher.core.errors import ConfigError

REAL_COMPOSE = launcher.config.load.compose
LAYOUT = {"gpus": 1, "nodes": 1, "tp": 1, "pp": 1, "dp": 1, "vpp": 1, "mbs": 1, "gbs": 8, "recompute": "none",
          "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False}
BACKENDS = {  # backend -> overrides (the shipped placeholder paths are replaced in load_with: see real_paths);
    # backend.python=python: the scripts exec the fake `python` on PATH, not the launcher's own interpreter
    "torch": ["backend.python=python"],
    "megatron_deepspeed": ["backend.python=python", "backend.launcher=deepspeed",  # DeepSpeed's runner too
                           "backend.megatron.tokenizer_type=NullTokenizer"],  # the tiny model names no tokenizer
    "megatron_lm": ["backend.python=python"],
}
PLACEHOLDER = "/path/to/"
FAKES = {
    "python": 'echo 29500\nexit 0',  # also answers the DeepSpeed launcher's free-port question
    "srun": 'echo "srun $*" >> "$FAKE_LOG"\nexit 0',
    "sbatch": 'echo "sbatch $*" >> "$FAKE_LOG"\nexit 0',
    "scontrol": 'echo n1',
}


def hostile_values(marker: Path) -> list[str]:
    x = str(marker)
    return [f"; touch {x}", f"$(touch {x})", f"`touch {x}`", f"\ntouch {x}\n", f"'; touch {x}; '",
            f'"; touch {x}; "', f"a\0b; touch {x}", f"x\rtouch {x}"]


def _strip_optional(tp):
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if typing.get_origin(tp) is typing.Union and len(args) == 1 else tp


def string_fields(schema: type = RootConfig, prefix: str = "") -> list[tuple[str, str]]:
    """(path, kind) for every str / list-of-str / list-of-list-of-str / dict field of the schema, recursively."""
    found = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        tp, path = _strip_optional(hints[f.name]), f"{prefix}{f.name}"
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if dataclasses.is_dataclass(tp):
            found += string_fields(tp, f"{path}.")
        elif tp is str:
            found.append((path, "str"))
        elif origin is list and args == (str,):
            found.append((path, "list"))
        elif origin is list and typing.get_origin(args[0]) is list:
            found.append((path, "list_of_lists"))
        elif origin is dict:
            found += [(path, "dict_value"), (path, "dict_key")]
        elif origin is list and typing.get_origin(args[0]) is dict:
            found += [(path, "list_of_dicts_value"), (path, "list_of_dicts_key")]
    return found


def placed(kind: str, value: str):
    return {"str": value, "list": [value], "list_of_lists": [[value]], "dict_value": {"K": value},
            "dict_key": {value: "v"}, "list_of_dicts_value": [{"recompute": value}],
            "list_of_dicts_key": [{value: 1}]}[kind]


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fakebin")
    for name, body in FAKES.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def load_with(monkeypatch, base: list[str], path: str, value):
    """The config `python -m launcher` would load if a config file set `path` to `value` (the composed config is
    built once per base and restored after each use: composing takes far longer than loading)."""
    from omegaconf import OmegaConf, open_dict

    import launcher.config.load as config

    composed = _composed(tuple(base))
    before = OmegaConf.select(composed, path)
    before = OmegaConf.to_container(before) if OmegaConf.is_config(before) else before
    with open_dict(composed):
        OmegaConf.update(composed, path, value, merge=False)
    monkeypatch.setattr(config, "compose", lambda overrides, config_dirs=(): composed)
    try:
        return config.load_config([])
    finally:
        with open_dict(composed):
            OmegaConf.update(composed, path, before, merge=False)


@functools.cache
def _composed(base: tuple[str, ...]):
    composed = REAL_COMPOSE(list(base))
    real_paths(composed)
    return composed


def real_paths(node) -> None:
    """The shipped Megatron configs point at /path/to/... placeholders, which the backends refuse: give every such
    value (wherever the schema keeps it) a real-looking path, so that the whole launch is rendered."""
    from omegaconf import DictConfig

    for key in list(node.keys()):
        value = node._get_node(key)
        if isinstance(value, DictConfig):
            real_paths(node[key])
        elif isinstance(node[key], str) and node[key].startswith(PLACEHOLDER):
            node[key] = "/cluster-only-fs/" + node[key][len(PLACEHOLDER):]  # not mounted here: not checked


def render_all(cfg, out: Path) -> list[Path]:
    """Every script the project writes for this config: trial launch.sh, export/*, submitit's sbatch file."""
    from analysis.report.conclusion import _export
    from launcher.core.layout import Layout
    from launcher.run.executor import SlurmRunner
    from launcher.run.folder import SweepFolder
    from launcher.run.trial_files import spec_for

    trial = out / "trial"
    spec = spec_for(cfg, Layout.from_dict(LAYOUT), trial)
    trial.mkdir(parents=True)
    for name, content in spec.files.items():
        (trial / name).write_text(content)
    (trial / "launch.sh").write_text(spec.script)
    best = {"config_hash": "c0ffee", "layout": LAYOUT, "metrics": {"step_time_s": 0.5, "tokens_per_s": 10.0}}
    written = _export(cfg, SweepFolder(out), best, train_iters=10)
    executor = SlurmRunner(cfg.executor, cfg.cluster, out / "jobs")._executor(1, 1, ())
    sbatch = out / "submitit.sbatch"
    sbatch.write_text(executor._make_submission_file_text(executor._submitit_command_str, "uid"))
    return [trial / "launch.sh", written["launch.sh"], written["train.sbatch"], sbatch]


def run_all(cases: list[tuple[list[Path], Path]], fake_bin: Path, cwd: Path) -> None:
    """Run every case's scripts from one bash driver (process start-up dominates): each script alone, and the two
    launch scripts once more as under SLURM (their other branch); FAKE_LOG per case."""
    slurm = "SLURM_JOB_NODELIST=n1 SLURM_PROCID=0 SLURM_NNODES=1 SLURM_JOB_ID=7 "
    lines = []
    for scripts, out in cases:
        log = f"FAKE_LOG={shlex.quote(str(out / 'fake.log'))} "
        for script in scripts:
            run = f"(cd {shlex.quote(str(out))} && {log}bash {shlex.quote(str(script))})"
            lines.append(run)
            if script.name == "launch.sh":
                lines.append(run.replace(f"&& {log}", f"&& {log}{slurm}"))
    env = {"PATH": f"{fake_bin}:{os.environ['PATH']}", "HOME": str(cwd)}
    driver = cwd / "driver.sh"
    driver.write_text("\n".join(lines) + "\n")
    subprocess.run(["bash", str(driver)], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, check=False)


def test_the_schema_walk_finds_the_fields_that_reach_scripts():
    paths = {p for p, _ in string_fields()}
    assert {"executor.account", "executor.env", "executor.sbatch_args", "executor.srun_args", "executor.setup",
            "cluster.partition", "backend.python", "backend.extra_args", "model.name"} <= paths


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_hostile_strings_are_refused_or_inert(backend, tmp_path, fake_bin, monkeypatch):
    base = ["+sweep=tiny", "executor=slurm", f"backend={backend}", *BACKENDS[backend]]
    fields = [(p, k) for p, k in string_fields() if p not in SHELL_CODE_FIELDS]
    if backend != "torch":  # the other sections render the same text for every backend: once is enough
        fields = [(p, k) for p, k in fields if p.startswith("backend.")]
    refused, cases = 0, []
    for path, kind in fields:
        for value in hostile_values(tmp_path / f"X-{len(cases)}"):
            try:
                cfg = load_with(monkeypatch, base, path, placed(kind, value))
            except ConfigError as exc:
                assert exc.field.startswith(path), (path, str(exc))  # the message names the field
                refused += 1
                continue
            except Exception as exc:  # any other refusal must still be a clean, named one
                raise AssertionError(f"{path}={value!r} ({kind}): {type(exc).__name__}: {exc}") from None
            out = tmp_path / f"case-{len(cases)}"
            try:
                scripts = render_all(cfg, out)
            except ConfigError:  # refused while rendering (e.g. an unknown tokenizer): nothing was written to run
                refused += 1
                continue
            cases.append((scripts, out, path, kind, value))
    run_all([(scripts, out) for scripts, out, *_ in cases], fake_bin, tmp_path)
    executed = [(path, kind, value) for n, (_, _, path, kind, value) in enumerate(cases)
                if (tmp_path / f"X-{n}").exists()]
    ran = sum((out / "fake.log").exists() for _, out, *_ in cases)
    print(f"{backend}: {len(fields)} fields, {refused} values refused, {len(cases)} rendered and run "
          f"({ran} reached srun/sbatch), {len(executed)} executed")
    assert cases and ran == len(cases)  # every case's scripts really ran (up to the fake srun)
    assert executed == []


def test_setup_lines_are_the_one_place_for_shell_code(tmp_path, fake_bin, monkeypatch):
    """executor.setup is code by design (module load, venv activation): it runs, but only one line per item."""
    marker = tmp_path / "X"
    cfg = load_with(monkeypatch, ["+sweep=tiny", "executor=slurm", *BACKENDS["torch"]], "executor.setup", [f"touch {marker}"])
    run_all([(render_all(cfg, tmp_path / "out"), tmp_path / "out")], fake_bin, tmp_path)
    assert marker.exists()  # the control: the harness does see what runs
    with pytest.raises(ConfigError, match="executor.setup"):
        load_with(monkeypatch, ["+sweep=tiny", "executor=slurm"], "executor.setup", ["module load x\nrm -rf ~"])
