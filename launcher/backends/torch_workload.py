"""Launch of the embedded workload (launcher.workload): a small GPT trained with real TP x PP x DP.

Each node runs `<python> -m torch.distributed.run ... -m launcher.workload ARGS` (or DeepSpeed's runner when
backend.launcher is 'deepspeed'). backend.python is rendered as configured: for local runs the lead passes the
interpreter it runs under, on a cluster it is the compute nodes' Python.
"""

from __future__ import annotations

from launcher.backends.launch import LaunchSpec, check_layout, render_script
from launcher.errors import ConfigError
from launcher.layout import Layout
from launcher.schema import BackendConfig, ClusterConfig, ModelConfig

MODULE = "launcher.workload"


def render(model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
           trial_dir: str, mem_limit_mb: int = 0) -> LaunchSpec:
    check_layout(layout, cluster)
    check_supported(model, layout)
    program_argv = [backend.python, "-m", MODULE, *workload_args(model, cluster, backend, layout, mem_limit_mb)]
    script = render_script(title=f"{model.name} on the embedded workload", layout=layout, python=backend.python,
                           launcher=backend.launcher, target=program_argv[1:], env={}, trial_dir=trial_dir)
    return LaunchSpec(script=script, files={}, env={}, program_argv=program_argv,
                      nproc_per_node=layout.gpus_per_node, nnodes=layout.nodes)


def check_supported(model: ModelConfig, layout: Layout) -> None:
    """What the embedded workload refuses beyond Megatron's rules (launcher/workload/__main__.py validate), so the
    planner rejects it instead of a job failing with config_error."""
    if model.vocab % layout.tp:
        raise ConfigError("layout.tp", layout.tp, f"the workload shards the vocabulary ({model.vocab}) over tp: "
                          "pick a tp dividing it")
    if layout.sequence_parallel and model.seq_len % layout.tp:
        raise ConfigError("layout.sequence_parallel", True, f"seq_len {model.seq_len} must be divisible by tp "
                          f"{layout.tp} to shard the sequence")
    if layout.pp > 1 and layout.microbatches < layout.pp:
        raise ConfigError("layout.gbs", layout.gbs, f"{layout.microbatches} micro-batches per pipeline, fewer than "
                          f"pp={layout.pp}: 1F1B needs at least pp; raise gbs or lower mbs")


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
    if layout.sequence_parallel:
        args.append("--sequence-parallel")
    args += ["--zero-stage", layout.zero_stage]
    if layout.distributed_optimizer:
        args.append("--distributed-optimizer")
    args += ["--precision", backend.precision, "--warmup-iters", backend.warmup_iters,
             "--measure-iters", backend.measure_iters, "--seed", backend.seed,
             "--mem-limit-mb", mem_limit_mb, "--peak-tflops", cluster.peak_tflops]
    return [str(arg) for arg in args] + list(backend.extra_args)
