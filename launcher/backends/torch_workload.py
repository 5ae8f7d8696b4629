"""Launch of the embedded workload (launcher.workload): a small GPT trained with real TP x PP x DP.

Each node runs `<python> -m torch.distributed.run ... -m launcher.workload ARGS` (or DeepSpeed's runner when
backend.launcher is 'deepspeed'). backend.python is rendered as configured: for local runs the lead passes the
interpreter it runs under, on a cluster it is the compute nodes' Python.
"""

from __future__ import annotations

from launcher.backends.base import BackendBase
from launcher.backends.launch import LaunchSpec, render_script
from launcher.config.schema import BackendConfig, ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.core.names import BackendName

MODULE = "launcher.workload"


class TorchWorkload(BackendBase):
    name = BackendName.torch
    log_format = "workload"
    reports_planner_flops = True  # the workload prints FLOP rates in both of the planner's conventions

    def launch(self, model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
               trial_dir: str, env: dict[str, str], mem_limit_mb: int) -> LaunchSpec:
        program_argv = [backend.python, "-m", MODULE, *workload_args(model, cluster, backend, layout, mem_limit_mb)]
        script = render_script(title=f"{model.name} on the embedded workload", layout=layout, python=backend.python,
                               launcher=backend.launcher, target=program_argv[1:], env=env, trial_dir=trial_dir)
        return LaunchSpec(script=script, files={}, env=env, program_argv=program_argv,
                          nproc_per_node=layout.gpus_per_node, nnodes=layout.nodes)

    def full_length_note(self, backend: BackendConfig, iterations: int) -> str:
        return (f"--warmup-iters 0 --measure-iters {iterations} (benchmark: {backend.warmup_iters}+"
                f"{backend.measure_iters}) of the embedded workload")


BACKEND = TorchWorkload()


def workload_args(model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout,
                  mem_limit_mb: int) -> list[str]:
    """The workload's command line (its parser: launcher/workload/__main__.py build_parser)."""
    args = ["--layers", model.layers, "--hidden", model.hidden, "--heads", model.heads,
            "--kv-heads", model.kv_heads, "--ffn-hidden", model.ffn_hidden]
    if model.swiglu:
        args.append("--swiglu")
    args += ["--seq-len", model.seq_len, "--vocab", model.vocab, "--norm", model.norm]
    if not model.tied_embeddings:
        args.append("--untie-embeddings")
    args += ["--tp", layout.tp, "--pp", layout.pp, "--dp", layout.dp, "--vpp", layout.vpp,
             "--mbs", layout.mbs, "--gbs", layout.gbs, "--recompute", layout.recompute]
    if layout.recompute_every > 1:
        args += ["--recompute-every", layout.recompute_every]
    if layout.sequence_parallel:
        args.append("--sequence-parallel")
    args += moe_args(model, layout)
    args += ["--zero-stage", layout.zero_stage]
    if layout.distributed_optimizer:
        args.append("--distributed-optimizer")
    if not backend.flash_attention:  # the explicit softmax(QK^T)V that stores the s x s scores, as the plan assumes
        args += ["--attention", "math"]
    args += ["--precision", backend.precision, "--warmup-iters", backend.warmup_iters,
             "--measure-iters", backend.measure_iters, "--seed", backend.seed,
             "--mem-limit-mb", mem_limit_mb, "--peak-tflops", cluster.peak_tflops]
    return [str(arg) for arg in args] + list(backend.extra_args)


def moe_args(model: ModelConfig, layout: Layout) -> list[object]:
    """The workload's MoE layer (launcher/workload/moe.py); --etp always explicit (the workload's default is --tp,
    the layout's 1). Nothing for a dense model."""
    if not model.is_moe:
        return []
    args: list[object] = ["--num-experts", model.num_experts, "--moe-topk", model.moe_topk,
                          "--moe-ffn-hidden", model.moe_ffn_hidden]
    if model.shared_expert_ffn_hidden:
        args += ["--shared-expert-ffn-hidden", model.shared_expert_ffn_hidden]
    if model.moe_aux_loss_coeff:
        args += ["--moe-aux-loss-coeff", f"{model.moe_aux_loss_coeff:g}"]
    return args + ["--ep", layout.ep, "--etp", layout.etp]
