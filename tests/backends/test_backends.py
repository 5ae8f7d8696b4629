"""The shared per-node launch (launcher/backends/launch.py), dispatch, and the embedded-workload backend.

The rendered scripts are RUN here with bash (tests/backend_helpers.py): a fake interpreter records the argv it
receives, a fake `scontrol` stands in for SLURM, so quoting and the SLURM node/rank logic are checked for real.

Golden files: tests/golden/; regenerate with `PARASWEEP_UPDATE_GOLDEN=1 python -m pytest tests/backends/`
and review the diff.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from backend_helpers import (
    NASTY,
    PORT_123456,
    SLURM_RANK1,
    a100_80g,
    check_golden,
    cpu,
    fake_python,
    golden_layout,
    llama2_70b,
    received_argv,
    run_script,
    tiny,
    workload_spec,
)

from launcher.backends import launch_command, render_launch
from launcher.backends.launch import node_preamble
from launcher.backends.megatron_common import known_flags
from launcher.config.schema import BackendConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout

# --- dispatch, layout checks ---------------------------------------------------------------------------------

def test_unknown_backend_name_is_a_config_error():
    backend = replace(BackendConfig(), name="nemo")  # past the schema's own check, e.g. a hand-built config
    with pytest.raises(ConfigError) as err:
        render_launch(tiny(), cpu(), backend, Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1), trial_dir="/t")
    assert err.value.field == "backend.name" and "megatron_lm" in err.value.fix


@pytest.mark.parametrize("layout, field", [
    (Layout(gpus=6, nodes=4, tp=2, pp=1, dp=3), "layout.gpus_nodes"),      # not whole nodes
    (Layout(gpus=16, nodes=1, tp=2, pp=2, dp=4), "layout.gpus_nodes"),    # 16 ranks on an 8-GPU node
])
def test_layouts_the_nodes_cannot_hold_are_refused(layout, field):
    with pytest.raises(ConfigError) as err:
        render_launch(tiny(), cpu(), BackendConfig(), layout, trial_dir="/t")
    assert err.value.field == field


# --- the embedded workload -----------------------------------------------------------------------------------

def test_workload_argv_carries_model_layout_and_run_settings(tmp_path):
    layout = Layout(gpus=8, nodes=1, tp=2, pp=2, dp=2, vpp=2, mbs=1, gbs=8, recompute="full",
                    sequence_parallel=True, zero_stage=0, distributed_optimizer=True)
    spec = workload_spec(tmp_path, layout, extra_args=["--attention", "math"])
    assert spec.program_argv[1:] == [
        "-m", "launcher.workload", "--layers", "4", "--hidden", "256", "--heads", "4", "--kv-heads", "4",
        "--ffn-hidden", "1024", "--seq-len", "128", "--vocab", "1024", "--norm", "layernorm",
        "--tp", "2", "--pp", "2", "--dp", "2", "--vpp", "2", "--mbs", "1", "--gbs", "8", "--recompute", "full",
        "--sequence-parallel", "--zero-stage", "0", "--distributed-optimizer", "--precision", "fp32",
        "--warmup-iters", "3", "--measure-iters", "5", "--seed", "1234", "--mem-limit-mb", "500",
        "--peak-tflops", "0.1", "--attention", "math"]
    assert spec.nproc_per_node == 8 and spec.nnodes == 1 and spec.files == {} and spec.env == {}


def test_workload_parser_accepts_every_rendered_argument(tmp_path):
    from launcher.workload.__main__ import build_parser

    layout = Layout(gpus=4, nodes=1, tp=2, pp=2, dp=1, vpp=1, mbs=1, gbs=4, recompute="selective")
    model = ModelConfig(name="m", layers=4, hidden=256, heads=4, kv_heads=2, swiglu=True, norm="rmsnorm",
                        tied_embeddings=False)
    backend = BackendConfig(name="torch", precision="bf16")
    spec = render_launch(model, cpu(), backend, layout, trial_dir="/t", mem_limit_mb=500)
    args = build_parser().parse_args(spec.program_argv[3:])
    assert (args.kv_heads, args.swiglu, args.norm, args.untie_embeddings) == (2, True, "rmsnorm", True)
    assert (args.tp, args.pp, args.recompute, args.precision, args.mem_limit_mb) == (2, 2, "selective", "bf16", 500)


def test_workload_golden_llama2_70b():
    backend = BackendConfig(name="torch", precision="bf16", warmup_iters=5, measure_iters=10, python="python")
    spec = render_launch(llama2_70b(), a100_80g(), backend, golden_layout(), trial_dir="/scratch/sweeps/70b/t0001")
    check_golden("llama2-70b_torch.sh", spec.script)


# --- quoting: values reach the program literally -------------------------------------------------------------

def test_config_values_reach_the_program_literally(tmp_path):
    spec = workload_spec(tmp_path, Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, gbs=2), extra_args=NASTY)
    result = run_script(spec.script, tmp_path)
    assert result.returncode == 0, result.stderr
    assert received_argv(tmp_path) == ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                                       "--nnodes", "1", *spec.program_argv[1:]]
    assert received_argv(tmp_path)[-len(NASTY):] == NASTY
    assert not list(tmp_path.glob("pwned*")), "a config value was executed by the shell"


def test_newline_in_a_commented_value_cannot_start_a_command(tmp_path):
    spec = render_launch(replace(tiny(), name="x\ntouch pwned_name"), cpu(),
                         BackendConfig(name="torch", python=fake_python(tmp_path)),
                         Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1), trial_dir=str(tmp_path / "t\ntouch pwned_dir"))
    assert run_script(spec.script, tmp_path).returncode == 0
    assert not list(tmp_path.glob("pwned*"))


# --- SLURM: node rank, rendezvous, node count ----------------------------------------------------------------

def test_under_slurm_every_node_joins_the_first_hosts_rendezvous(tmp_path):
    from torch.distributed.run import get_args_parser

    spec = workload_spec(tmp_path, Layout(gpus=4, nodes=2, tp=1, pp=1, dp=4, gbs=4))
    result = run_script(spec.script, tmp_path, slurm=SLURM_RANK1)
    assert result.returncode == 0, result.stderr
    argv = received_argv(tmp_path)
    assert argv[:2] == ["-m", "torch.distributed.run"]
    args = get_args_parser().parse_args(argv[2:])  # torch's own parser accepts the launcher flags
    assert (args.nnodes, args.node_rank, args.nproc_per_node) == ("2", 1, "2")
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == ("c10d", f"node-a:{PORT_123456}", "123456")
    assert args.module and args.training_script == "launcher.workload"
    assert args.training_script_args == spec.program_argv[3:]


def test_preset_master_port_wins_over_the_job_id_port(tmp_path):
    spec = workload_spec(tmp_path, Layout(gpus=4, nodes=2, tp=1, pp=1, dp=4, gbs=4))
    assert run_script(spec.script, tmp_path, slurm={**SLURM_RANK1, "MASTER_PORT": "31337"}).returncode == 0
    assert "node-a:31337" in received_argv(tmp_path)


@pytest.mark.parametrize("slurm, nodes, message", [
    (None, 2, "needs 2 node(s) but runs on 1"),             # a 2-node trial started without SLURM
    (SLURM_RANK1, 4, "needs 4 node(s) but runs on 2"),      # job got fewer nodes than the layout
])
def test_wrong_node_count_fails_fast_instead_of_hanging(tmp_path, slurm, nodes, message):
    spec = workload_spec(tmp_path, Layout(gpus=2 * nodes, nodes=nodes, tp=1, pp=1, dp=2 * nodes, gbs=2 * nodes))
    result = run_script(spec.script, tmp_path, slurm=slurm)
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "argv.bin").exists()


def test_missing_task_rank_under_slurm_is_named(tmp_path):
    spec = workload_spec(tmp_path, Layout(gpus=4, nodes=2, tp=1, pp=1, dp=4, gbs=4))
    slurm = {k: v for k, v in SLURM_RANK1.items() if k != "SLURM_PROCID"}
    result = run_script(spec.script, tmp_path, slurm=slurm)
    assert result.returncode != 0 and "SLURM_PROCID" in result.stderr


# --- the DeepSpeed launcher ----------------------------------------------------------------------------------

def test_deepspeed_launcher_under_slurm_uses_no_ssh_with_a_hostfile_of_all_nodes(tmp_path):
    spec = workload_spec(tmp_path, Layout(gpus=4, nodes=2, tp=1, pp=1, dp=4, gbs=4), launcher="deepspeed")
    result = run_script(spec.script, tmp_path, slurm=SLURM_RANK1)
    assert result.returncode == 0, result.stderr
    argv = received_argv(tmp_path)
    hostfile = str(tmp_path / "trial" / "ds_hostfile.node1")
    assert argv[:argv.index("--module")] == [
        "-u", "-m", "deepspeed.launcher.runner", "--num_gpus", "2", "--no_local_rank", "--hostfile", hostfile,
        "--num_nodes", "2", "--no_ssh", "--node_rank", "1", "--master_addr", "node-a", "--master_port", PORT_123456]
    assert argv[argv.index("--module") + 1:] == spec.program_argv[2:]
    assert Path(hostfile).read_text() == "node-a slots=2\nnode-b slots=2\n"
    runner_flags = known_flags("deepspeed_runner")
    assert all(tok in runner_flags for tok in argv[3:argv.index("--module") + 1] if tok.startswith("--"))


def test_deepspeed_launcher_alone_picks_a_free_port(tmp_path):
    spec = workload_spec(tmp_path, Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, gbs=2), launcher="deepspeed")
    assert run_script(spec.script, tmp_path).returncode == 0
    argv = received_argv(tmp_path)
    port = int(argv[argv.index("--master_port") + 1])
    assert 1024 <= port <= 65535 and "--no_ssh" not in argv


# --- the shared preamble and the one-line command ------------------------------------------------------------

def test_every_backend_uses_the_same_node_preamble():
    assert node_preamble(8) in render_launch(llama2_70b(), a100_80g(), BackendConfig(name="torch"),
                                             golden_layout(), trial_dir="/t").script


def test_one_line_command_single_node_is_standalone_torchrun(tmp_path):
    spec = workload_spec(tmp_path, Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, gbs=2), extra_args=["; touch pwned"])
    words = shlex.split(launch_command(spec))
    assert words[1:7] == ["-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node"]
    assert words[-1] == "; touch pwned" and words[8:] == spec.program_argv[1:]


def test_one_line_command_multi_node_names_the_rendezvous_variables():
    spec = render_launch(llama2_70b(), a100_80g(), BackendConfig(name="torch"), golden_layout(), trial_dir="/t")
    command = launch_command(spec)
    assert '--nnodes 8 --nproc-per-node 8 --node-rank "$NODE_RANK"' in command
    assert '--rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT"' in command


def test_workload_without_flash_attention_runs_the_attention_the_plan_assumes(tmp_path):
    layout = Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, gbs=2)
    assert "--attention" not in workload_spec(tmp_path, layout).program_argv
    argv = workload_spec(tmp_path, layout, flash_attention=False).program_argv
    assert argv[argv.index("--attention") + 1] == "math"
