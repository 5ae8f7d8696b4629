"""The rules table against the real libraries: megatron-core 0.16.1's own validation and DeepSpeed 0.19.8's config
model, from the `crosscheck` extra (`DS_BUILD_OPS=0 pip install -e '.[crosscheck]'`; .ci/run installs it and sets
PARASWEEP_REQUIRE_CROSSCHECK=1, without which a checkout lacking the extra skips this file).

Megatron-LM. For generated models and layouts, the flags the megatron_lm backend renders are read back and handed to
Megatron's own checks, each one an `Oracle`:
- megatron-core code wherever it is importable and runs on a CPU: TransformerConfig / ModelParallelConfig
  __post_init__, parallel_state.initialize_model_parallel (on torch's single-process "fake" process group, so any
  world size), get_num_layers_to_build, the micro-batch calculator, get_batch_on_this_cp_rank and the
  sequence-parallel scatter;
- a transcription, cited by file and line at tag core_v0.16.1 of NVIDIA/Megatron-LM, of the checks that live in
  megatron/training/arguments.py (not in the megatron-core wheel) and in the interleaved schedule (needs CUDA).
Each oracle covers some rule codes; the table refuses a layout under one of them exactly when the oracle does, or
KNOWN_DIFFERENCES says where and why not. Rules with no Megatron counterpart are in NOT_MEGATRON, with the reason.
"Accepts" means Megatron runs the layout as labelled: a layout it silently rewrites (another dp, another vpp,
sequence parallelism switched off at tp = 1) counts as refused, since the trial would measure something else.

DeepSpeed. The ds_config.json the megatron_deepspeed backend renders goes through deepspeed.runtime.config.
DeepSpeedConfig (its pydantic sub-models and its batch arithmetic, with the data-parallel size Megatron-DeepSpeed
passes through its mpu), and the table's batch and ZeRO rules are compared with what DeepSpeed refuses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional
from unittest import mock

import pytest

if not os.environ.get("PARASWEEP_REQUIRE_CROSSCHECK"):
    for _module in ("megatron.core", "deepspeed"):
        pytest.importorskip(_module, reason=f"{_module} missing: DS_BUILD_OPS=0 pip install -e '.[crosscheck]' "
                                            "(PARASWEEP_REQUIRE_CROSSCHECK=1 makes this a failure)")

with warnings.catch_warnings():  # "Transformer Engine and Apex are not installed": the local fallbacks are fine
    warnings.simplefilter("ignore")
    import deepspeed.runtime.config as ds_config_module
    import torch
    import torch.distributed as dist
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from megatron.core import parallel_state
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.tensor_parallel.mappings import scatter_to_sequence_parallel_region
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.utils import divide, get_batch_on_this_cp_rank
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

from backend_helpers import backend_config
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from launcher.backends import megatron_deepspeed, megatron_lm
from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import RECOMPUTE_MODES, Layout
from launcher.plan.estimator import estimate
from launcher.plan.rules import check, rules_for

MEGATRON_CORE = "0.16.1"
DEEPSPEED = "0.19.8"
ARGS_PY = "Megatron-LM megatron/training/arguments.py @ core_v0.16.1"
NOT_REACHED = "not reached"
"""An oracle whose check Megatron never gets to for this layout (an earlier check of another oracle stops it)."""


def test_the_pinned_releases_are_the_ones_installed():
    """The citations below are to these releases: a new pin must be re-read against them."""
    import deepspeed
    import megatron.core

    assert (megatron.core.__version__, deepspeed.__version__) == (MEGATRON_CORE, DEEPSPEED)


# --- Megatron's view of a rendered launch ------------------------------------------------------------------------

def megatron_args(argv: list[str]) -> argparse.Namespace:
    """The flags of a rendered pretrain_gpt.py command line that Megatron's checks read, with Megatron's defaults."""
    parser = argparse.ArgumentParser(add_help=False)
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size", "--seq-length",
                 "--max-position-embeddings", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                 "--micro-batch-size", "--global-batch-size", "--num-query-groups", "--recompute-num-layers",
                 "--num-layers-per-virtual-pipeline-stage"):
        parser.add_argument(flag, type=int)
    for flag in ("--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
                 "--moe-shared-expert-intermediate-size", "--expert-tensor-parallel-size"):
        parser.add_argument(flag, type=int)
    parser.add_argument("--expert-model-parallel-size", type=int, default=1)
    parser.add_argument("--context-parallel-size", type=int, default=1)
    parser.add_argument("--recompute-granularity")
    parser.add_argument("--recompute-method")
    for flag in ("--sequence-parallel", "--group-query-attention", "--bf16", "--fp16", "--swiglu",
                 "--moe-router-pre-softmax"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--no-overlap-p2p-communication", action="store_false", dest="overlap_p2p_comm")
    args, _ = parser.parse_known_args(argv)
    return args


@dataclass(frozen=True)
class Launch:
    """One layout as Megatron-LM receives it: the rendered flags and the world the launcher starts."""

    model: ModelConfig
    layout: Layout
    args: argparse.Namespace

    @property
    def world(self) -> int:
        return self.layout.gpus

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.args.bf16 else torch.float16 if self.args.fp16 else torch.float32


BACKEND = backend_config("megatron_lm", python="python", path="/m", tokenizer_type="NullTokenizer", precision="bf16")


def launch(model: ModelConfig, layout: Layout) -> Launch:
    return Launch(model, layout, megatron_args(megatron_lm.program_args(model, BACKEND, layout)))


@contextmanager
def megatron_world(world: int, tp: int = 1, pp: int = 1, cp: int = 1, vpp: Optional[int] = None):
    """megatron-core's process groups for a world of `world` ranks, seen from rank 0, on torch's fake backend."""
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        parallel_state.initialize_model_parallel(tp, pp, vpp, context_parallel_size=cp,
                                                 create_gloo_process_groups=False)
        yield
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()


def transformer_config(run: Launch, **fields) -> TransformerConfig:
    """megatron-core's TransformerConfig with the launch's dtype; `fields` isolate the check one oracle asks for."""
    base = dict(num_layers=1, hidden_size=64, num_attention_heads=1, pipeline_dtype=run.dtype,
                params_dtype=run.dtype, bf16=run.args.bf16, fp16=run.args.fp16)
    return TransformerConfig(**{**base, **fields})


def refusal(check: Callable[[], object], *errors: type[BaseException]) -> Optional[str]:
    """None when `check` passes, else the error Megatron raises (the refusal's text)."""
    try:
        check()
    except errors as e:
        return f"{type(e).__name__}: {e}"
    return None


# --- the oracles: one Megatron check each, returning its refusal or None ----------------------------------------

def world_size(run: Launch) -> Optional[str]:
    """parallel_state.py initialize_model_parallel: world % (tp*pp*cp), then dp = world / (tp*pp*cp)."""
    a = run.args
    dp: list[int] = []

    def init() -> None:
        with megatron_world(run.world, a.tensor_model_parallel_size, a.pipeline_model_parallel_size,
                            a.context_parallel_size):
            dp.append(parallel_state.get_data_parallel_world_size())

    error = refusal(init, RuntimeError)
    if error or dp[0] == run.layout.dp:
        return error
    return f"Megatron runs dp = {dp[0]}, the layout says dp = {run.layout.dp}"


def interleaving_needs_pipeline(run: Launch) -> Optional[str]:
    """parallel_state.py: 'pipeline-model-parallel size should be greater than 1 with interleaved schedule';
    arguments.py L573-582 asks pp > 2 only with --no-overlap-p2p-communication (overlap is on by default)."""
    a, vpp = run.args, run.layout.vpp
    if vpp == 1:
        return None
    if not a.overlap_p2p_comm and a.pipeline_model_parallel_size <= 2:
        return f"{ARGS_PY} L579: pipeline-model-parallel size should be greater than 2"

    def init() -> None:
        with megatron_world(a.pipeline_model_parallel_size, pp=a.pipeline_model_parallel_size, vpp=vpp):
            pass

    return refusal(init, RuntimeError)


def layers_per_stage(run: Launch) -> Optional[str]:
    """transformer_block.py get_num_layers_to_build: 'num_layers should be divisible by pipeline_model_parallel_size'
    (and arguments.py L570)."""
    a = run.args
    config = transformer_config(run, num_layers=a.num_layers,
                                pipeline_model_parallel_size=a.pipeline_model_parallel_size)
    return refusal(lambda: get_num_layers_to_build(config, pp_rank=0), AssertionError)


def layers_per_virtual_stage(run: Launch) -> Optional[str]:
    """arguments.py L528-557 on the --num-layers-per-virtual-pipeline-stage the backend renders: layers % pp, layers
    per stage % layers per virtual stage, vpp = their quotient (which must be the layout's); then megatron-core's
    get_num_layers_to_build with that vpp."""
    a = run.args
    per_virtual = a.num_layers_per_virtual_pipeline_stage
    if per_virtual is None:
        return None
    pp = a.pipeline_model_parallel_size
    if a.num_layers % pp != 0:
        return f"{ARGS_PY} L543: number of layers of the model must be divisible pipeline model parallel size"
    per_stage = a.num_layers // pp
    if per_virtual == 0:
        return f"{ARGS_PY} L547: ZeroDivisionError (--num-layers-per-virtual-pipeline-stage 0)"
    if per_stage % per_virtual != 0:
        return f"{ARGS_PY} L547: number of layers per pipeline stage must be divisible number of layers per virtual"
    vpp = per_stage // per_virtual
    if vpp != run.layout.vpp:
        return f"Megatron derives vpp = {vpp} from the flags, the layout says vpp = {run.layout.vpp}"
    if pp == 1:
        return None  # interleaving_needs_pipeline refuses it
    config = transformer_config(run, num_layers=a.num_layers, pipeline_model_parallel_size=pp,
                                virtual_pipeline_model_parallel_size=vpp)
    return refusal(lambda: get_num_layers_to_build(config, vp_stage=0, pp_rank=0), AssertionError)


def attention_heads(run: Launch) -> Optional[str]:
    """TransformerConfig: 'num_attention_heads must be a multiple of tensor_model_parallel_size'."""
    a = run.args
    return refusal(lambda: transformer_config(run, num_attention_heads=a.num_attention_heads,
                                              tensor_model_parallel_size=a.tensor_model_parallel_size), ValueError)


def query_groups(run: Launch) -> Optional[str]:
    """TransformerConfig: 'num_query_groups must be a multiple or divisor of tensor_model_parallel_size'
    (num_query_groups = heads without --group-query-attention, as core_transformer_config_from_args sets it)."""
    a = run.args
    tp = a.tensor_model_parallel_size
    groups = a.num_query_groups if a.group_query_attention else a.num_attention_heads
    # heads = groups * tp: a multiple of tp, so that the heads check before it passes
    return refusal(lambda: transformer_config(run, num_attention_heads=groups * tp, num_query_groups=groups,
                                              tensor_model_parallel_size=tp), ValueError)


def ffn_split(run: Launch) -> Optional[str]:
    """tensor_parallel/layers.py RowParallelLinear (linear_fc2): input_size_per_partition = divide(ffn, tp)."""
    a = run.args
    return refusal(lambda: divide(a.ffn_hidden_size, a.tensor_model_parallel_size), AssertionError)


def head_dim(run: Launch) -> Optional[str]:
    """arguments.py L813-815: without --kv-channels, assert hidden_size % num_attention_heads == 0."""
    a = run.args
    return None if a.hidden_size % a.num_attention_heads == 0 else f"{ARGS_PY} L814: hidden % heads"


def positions(run: Launch) -> Optional[str]:
    """arguments.py L829-832: max_position_embeddings >= seq_length."""
    a = run.args
    return None if a.max_position_embeddings >= a.seq_length else f"{ARGS_PY} L830: max_position_embeddings"


def microbatches(run: Launch) -> Optional[str]:
    """num_microbatches_calculator.py ConstantNumMicroBatchesCalculator: gbs % (mbs * dp) == 0."""
    a = run.args
    return refusal(lambda: ConstantNumMicroBatchesCalculator(a.global_batch_size, a.micro_batch_size,
                                                             run.layout.dp, False, 0), AssertionError)


def interleaved_schedule(run: Launch) -> Optional[str]:
    """pipeline_parallel/schedules.py L995-1014 (forward_backward_pipelining_with_interleaving): the micro-batch
    group per virtual stage (ModelParallelConfig's microbatch_group_size_per_vp_stage, default pp) must be in
    [pp, m], and the last group 0 or >= pp."""
    a, lay = run.args, run.layout
    if lay.vpp == 1 or a.global_batch_size % (a.micro_batch_size * lay.dp) != 0:
        return None if lay.vpp == 1 else NOT_REACHED
    m = a.global_batch_size // (a.micro_batch_size * lay.dp)
    pp = a.pipeline_model_parallel_size
    group = ModelParallelConfig(pipeline_model_parallel_size=pp, virtual_pipeline_model_parallel_size=lay.vpp,
                                pipeline_dtype=run.dtype).microbatch_group_size_per_vp_stage
    if group > m or group < pp:
        return f"schedules.py L995: contiguous micro-batches {group} not in [PP={pp}, M={m}]"
    if 0 < m % group < pp:
        return f"schedules.py L1008: remainder of M={m} by N={group} is {m % group}, in (0, PP={pp})"
    return None


def context_split(run: Launch, tokens: Optional[list] = None) -> Optional[str]:
    """utils.py get_batch_on_this_cp_rank: the sequence viewed as 2*cp chunks (and arguments.py L817-820)."""
    a = run.args
    cp = a.context_parallel_size
    batch = {"tokens": torch.zeros(1, a.seq_length)}

    def split() -> None:
        with megatron_world(cp, cp=cp):
            kept = get_batch_on_this_cp_rank(batch)["tokens"]
        if tokens is not None:
            tokens.append(kept.shape[1])

    return refusal(split, RuntimeError)


def sequence_parallel_split(run: Launch) -> Optional[str]:
    """tensor_parallel/mappings.py scatter_to_sequence_parallel_region: the embedding output [s/cp, b, h] split
    over tp along its first dimension ('First dimension of the tensor should be divisible by tensor parallel
    size'). arguments.py L907-913 turns sequence parallelism off at tp = 1."""
    a = run.args
    tp, cp = a.tensor_model_parallel_size, a.context_parallel_size
    if not a.sequence_parallel or tp == 1:
        return None
    tokens: list[int] = []
    if context_split(run, tokens) is not None:
        return NOT_REACHED

    def scatter() -> None:
        with megatron_world(tp * cp, tp=tp, cp=cp):
            scatter_to_sequence_parallel_region(torch.zeros(tokens[0], 1, 1),
                                                group=parallel_state.get_tensor_model_parallel_group())

    return refusal(scatter, AssertionError)


def sequence_parallel_needs_tp(run: Launch) -> Optional[str]:
    """ModelParallelConfig: 'Cannot use sequence parallelism without tensor parallelism' (the Megatron-LM program
    instead switches it off at tp = 1, arguments.py L907-913: the trial would run without it either way)."""
    a = run.args
    return refusal(lambda: ModelParallelConfig(tensor_model_parallel_size=a.tensor_model_parallel_size,
                                               sequence_parallel=a.sequence_parallel), ValueError)


def recompute_flags(run: Launch) -> Optional[str]:
    """TransformerConfig's recompute checks (granularity, method, num_layers) on the flags the backend renders."""
    a = run.args
    return refusal(lambda: transformer_config(
        run, num_layers=a.num_layers, recompute_granularity=a.recompute_granularity,
        recompute_method=a.recompute_method, recompute_num_layers=a.recompute_num_layers), ValueError)


def expert_parallel_needs_experts(run: Launch) -> Optional[str]:
    """TransformerConfig: 'num_moe_experts must be non None to use expert-parallel' (and its router checks on the
    flags rendered: top-1 routing needs --moe-router-pre-softmax, which the backend renders)."""
    a = run.args
    return refusal(lambda: transformer_config(run, num_moe_experts=a.num_experts,
                                              moe_ffn_hidden_size=a.moe_ffn_hidden_size,
                                              moe_router_topk=a.moe_router_topk or 2,
                                              moe_router_pre_softmax=a.moe_router_pre_softmax,
                                              expert_model_parallel_size=a.expert_model_parallel_size), ValueError)


def experts_per_rank(run: Launch) -> Optional[str]:
    """arguments.py validate_args (Expert parallelism check): num_experts % expert_model_parallel_size == 0."""
    a = run.args
    if a.num_experts is None or a.num_experts % a.expert_model_parallel_size == 0:
        return None
    return f"{ARGS_PY}: num_experts must be divisible by expert_model_parallel_size"


def expert_mesh(run: Launch) -> Optional[str]:
    """parallel_state.py initialize_model_parallel: world % (etp*ep*pp), the expert mesh carved out of the world
    (etp defaults to tp). A dense model's expert groups are never used (None: ep_dense/etp_dense speak for it)."""
    a = run.args
    if a.num_experts is None:
        return None
    if world_size(run) is not None:
        return NOT_REACHED

    def init() -> None:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=run.world)
        try:
            parallel_state.initialize_model_parallel(
                a.tensor_model_parallel_size, a.pipeline_model_parallel_size, None,
                context_parallel_size=a.context_parallel_size,
                expert_model_parallel_size=a.expert_model_parallel_size,
                expert_tensor_parallel_size=a.expert_tensor_parallel_size, create_gloo_process_groups=False)
        finally:
            parallel_state.destroy_model_parallel()
            dist.destroy_process_group()

    return refusal(init, RuntimeError)


def expert_ffn_split(run: Launch) -> Optional[str]:
    """transformer/moe/experts.py (TEGroupedMLP / SequentialMLP): each expert's FC1/FC2 divide(moe_ffn, etp)."""
    a = run.args
    if a.num_experts is None:
        return None
    etp = a.expert_tensor_parallel_size or a.tensor_model_parallel_size
    return refusal(lambda: divide(a.moe_ffn_hidden_size, etp), AssertionError)


def shared_expert_split(run: Launch) -> Optional[str]:
    """transformer/moe/shared_experts.py SharedExpertMLP: a tensor-parallel MLP, divide(shared ffn, tp)."""
    a = run.args
    if not a.moe_shared_expert_intermediate_size:
        return None
    return refusal(lambda: divide(a.moe_shared_expert_intermediate_size, a.tensor_model_parallel_size),
                   AssertionError)


def moe_needs_sequence_parallel(run: Launch) -> Optional[str]:
    """arguments.py validate_args: 'When using MoE and tensor parallelism, sequence parallelism must be used.'
    (megatron-core's ModelParallelConfig only warns, and only for ep > 1.)"""
    a = run.args
    if a.num_experts is None or a.tensor_model_parallel_size == 1 or a.sequence_parallel:
        return None
    return f"{ARGS_PY}: When using MoE and tensor parallelism, sequence parallelism must be used."


@dataclass(frozen=True)
class Oracle:
    check: Callable[[Launch], Optional[str]]
    codes: frozenset[str]
    """The table's rules that say the same as this check: the table refuses under one of them iff it refuses."""


ORACLES = (
    Oracle(world_size, frozenset({"world"})),
    Oracle(interleaving_needs_pipeline, frozenset({"vpp_pp", "vpp_pp_overlap"})),
    Oracle(layers_per_stage, frozenset({"layers_pp"})),
    Oracle(layers_per_virtual_stage, frozenset({"layers_vpp"})),
    Oracle(attention_heads, frozenset({"heads_tp"})),
    Oracle(query_groups, frozenset({"kv_heads_tp"})),
    Oracle(ffn_split, frozenset({"ffn_tp"})),
    Oracle(head_dim, frozenset({"hidden_heads"})),
    Oracle(positions, frozenset({"max_position"})),
    Oracle(microbatches, frozenset({"gbs_divisible"})),
    Oracle(interleaved_schedule, frozenset({"vpp_microbatches"})),
    Oracle(context_split, frozenset({"cp_seq"})),
    Oracle(sequence_parallel_split, frozenset({"cp_sp_seq"})),
    Oracle(sequence_parallel_needs_tp, frozenset({"sp_tp"})),
    Oracle(recompute_flags, frozenset({"recompute"})),
    Oracle(expert_parallel_needs_experts, frozenset({"ep_dense"})),
    Oracle(experts_per_rank, frozenset({"experts_ep"})),
    Oracle(expert_mesh, frozenset({"ep_world"})),
    Oracle(expert_ffn_split, frozenset({"moe_ffn_etp"})),
    Oracle(shared_expert_split, frozenset({"shared_expert_tp"})),
    Oracle(moe_needs_sequence_parallel, frozenset({"moe_tp_sp"})),
)


@dataclass(frozen=True)
class Difference:
    where: Callable[[ModelConfig, Layout], bool]
    """The layouts on which parasweep refuses and megatron-core 0.16.1 accepts (exactly those: the test checks)."""
    reason: str


KNOWN_DIFFERENCES = {
    interleaving_needs_pipeline: Difference(
        lambda m, lay: lay.vpp > 1 and lay.pp == 2,
        "parasweep refuses vpp > 1 at pp = 2 (rule vpp_pp_overlap): the Megatron-LM release the backend's flags are "
        "read from (307dcf37, May 2024, arguments.py L243) asserts pp > 2 with interleaving unconditionally; "
        "0.16.1 asks it only with --no-overlap-p2p-communication, p2p overlap being on by default."),
    query_groups: Difference(
        lambda m, lay: m.kv_heads % lay.tp != 0 and lay.tp % m.kv_heads == 0,
        "parasweep refuses tp > kv_heads (rule kv_heads_tp): Megatron before f7dfb99 (Dec 2025; the 2024 and 2025 "
        "releases the backend targets, transformer_config.py 'num_query_groups must be a multiple of "
        "tensor_model_parallel_size') refuses it; 0.16.1 replicates the KV heads over tp instead, which the estimator "
        "does not model (memory.py and step_time.py divide the KV projections by tp)."),
}

NOT_MEGATRON = {
    "gpus_nodes": "the launch's shape (one task per node, gpus_per_node ranks each); Megatron sees only the world",
    "too_many_nodes": "the partition's size (cluster.nodes); nothing Megatron knows",
    "tp_node": "planner policy with a switch (plan.allow_tp_across_nodes): Megatron runs tp across nodes, at the "
               "network's bandwidth, which the step-time estimate charges when the switch is on",
    "zero_megatron_lm": "layout vocabulary: Megatron-LM has no ZeRO-2/3 flag (the backend renders ZeRO-1 as "
                        "--use-distributed-optimizer), so zero_stage 2/3 would run mislabelled",
    "distopt_zero": "layout vocabulary: two fields for one optimizer sharding",
    "zero_pp": "DeepSpeed's PipelineEngine rule (checked against DeepSpeed below); on megatron_lm zero_stage >= 2 is "
               "refused by zero_megatron_lm first",
    "zero_stage": "layout vocabulary: a value outside 0-3 (launcher/layout.py choices)",
    "etp_dense": "layout vocabulary: a dense model has no expert to split over etp; Megatron builds the (unused) "
                 "expert groups and runs the dense model, which the trial would then mislabel",
    "recompute_every_full": "layout vocabulary: recompute_every > 1 is a kind of full recompute; with selective the "
                            "backend renders selective recompute, which Megatron runs, but not as labelled",
    "recompute_every_layers": "layout vocabulary: a k that does not divide the chunk's layers would run "
                              "floor(layers/k) block-recomputed layers (0 when k exceeds them), which Megatron "
                              "accepts, but not as labelled (1/k of the layers)",
}


def test_every_megatron_lm_rule_is_compared_or_says_why_not():
    compared = set().union(*(o.codes for o in ORACLES))
    refusals = {r.code for r in rules_for("megatron_lm") if not r.warning}
    assert refusals == compared | set(NOT_MEGATRON), (refusals ^ (compared | set(NOT_MEGATRON)))
    assert not compared & set(NOT_MEGATRON)
    assert set(KNOWN_DIFFERENCES) <= {o.check for o in ORACLES}


# --- generated models and layouts ----------------------------------------------------------------------------------

@st.composite
def models(draw) -> ModelConfig:
    heads = draw(st.sampled_from([4, 8, 12, 16, 24, 32, 64, 128]))
    kv_heads = draw(st.sampled_from([k for k in (1, 2, 4, 8, heads) if heads % k == 0]))
    hidden = heads * draw(st.sampled_from([64, 128])) + draw(st.sampled_from([0, 0, 0, 32]))
    seq = draw(st.sampled_from([96, 1000, 2048, 4096, 4100, 8192]))
    return ModelConfig(name="m", layers=draw(st.sampled_from([2, 3, 4, 6, 8, 12, 24, 32, 48, 80, 126])),
                       hidden=hidden, heads=heads, kv_heads=kv_heads,
                       ffn_hidden=draw(st.sampled_from([4 * hidden, 8 * hidden // 3, 22018, 53248])),
                       swiglu=draw(st.booleans()), seq_len=seq,
                       max_position=draw(st.sampled_from([seq, seq, seq // 2])),
                       vocab=draw(st.sampled_from([32000, 50257, 128256])),
                       norm=draw(st.sampled_from(["layernorm", "rmsnorm"])))


@st.composite
def layouts(draw, gpus_per_node: int, *, cp_choices=(1, 1, 2, 4), vpp_choices=(1, 1, 2, 3, 4)) -> Layout:
    tp = draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    pp = draw(st.sampled_from([1, 2, 3, 4, 8]))
    cp = draw(st.sampled_from(cp_choices))
    dp = draw(st.sampled_from([1, 2, 3, 4]))
    gpus = tp * pp * cp * dp + draw(st.sampled_from([0, 0, 0, 0, tp, -1]))   # sometimes not the product
    gpus = max(1, gpus)
    mbs = draw(st.sampled_from([1, 2, 4]))
    gbs = mbs * dp * draw(st.sampled_from([1, 2, 3, 4, 8, 9, 16])) + draw(st.sampled_from([0, 0, 0, 1]))
    return Layout(gpus=gpus, nodes=-(-gpus // gpus_per_node), tp=tp, pp=pp, dp=dp, cp=cp,
                  vpp=draw(st.sampled_from(vpp_choices)), mbs=mbs, gbs=gbs,
                  recompute=draw(st.sampled_from(RECOMPUTE_MODES)), recompute_every=draw(st.sampled_from([1, 1, 2, 3])),
                  sequence_parallel=draw(st.booleans()), zero_stage=draw(st.sampled_from([0, 1])),
                  distributed_optimizer=draw(st.booleans()))


GPUS_PER_NODE = 8
CLUSTER = ClusterConfig(name="c", gpu="H100", gpus_per_node=GPUS_PER_NODE, nodes=1 << 10)
LLAMA_405B = ModelConfig(  # conf/model/llama3.1-405b.yaml
    name="llama3.1-405b", layers=126, hidden=16384, heads=128, kv_heads=8, swiglu=True, ffn_hidden=53248,
    seq_len=8192, max_position=131072, vocab=128256, tied_embeddings=False, norm="rmsnorm")


def compare_with_megatron(model: ModelConfig, layout: Layout) -> dict[str, tuple[bool, Optional[str]]]:
    """Per oracle: (the table refuses under its codes, Megatron's refusal); asserts they agree but where known."""
    table = {i.code for i in check(model, CLUSTER, layout, backend="megatron_lm").reasons}
    run = launch(model, layout)
    seen = {}
    for oracle in ORACLES:
        megatron = oracle.check(run)
        table_refuses = bool(table & oracle.codes)
        seen[oracle.check.__name__] = (table_refuses, megatron)
        if megatron == NOT_REACHED:
            continue
        known = KNOWN_DIFFERENCES.get(oracle.check)
        if known is not None and known.where(model, layout):
            assert table_refuses and megatron is None, (oracle.check.__name__, known.reason, megatron, table)
        else:
            assert table_refuses == (megatron is not None), (oracle.check.__name__, megatron, sorted(table), layout)
    return seen


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models(), layouts(GPUS_PER_NODE))
@example(LLAMA_405B, Layout(gpus=64, nodes=8, tp=16, pp=4, dp=1, mbs=1, gbs=64))          # tp 16 > kv_heads 8
@example(LLAMA_405B, Layout(gpus=32, nodes=4, tp=8, pp=2, dp=2, vpp=3, mbs=1, gbs=64))    # vpp at pp 2
@example(ModelConfig(name="m", layers=4, hidden=256, heads=4, seq_len=1004),             # sp: 1004 % 8 != 0
         Layout(gpus=8, nodes=1, tp=8, pp=1, dp=1, mbs=1, gbs=8, sequence_parallel=True))
def test_megatron_lm_rules_agree_with_megatron_core(model, layout):
    compare_with_megatron(model, layout)


@st.composite
def moe_models(draw) -> ModelConfig:
    dense = draw(models())
    experts = draw(st.sampled_from([1, 2, 4, 6, 8, 16, 64]))
    return dataclasses.replace(dense, num_experts=experts, moe_topk=draw(st.integers(1, min(experts, 8))),
                               moe_ffn_hidden=draw(st.sampled_from([768, 1000, 1408, 14336])),
                               shared_expert_ffn_hidden=draw(st.sampled_from([0, 0, 1000, 2816])))


@st.composite
def expert_layouts(draw, gpus_per_node: int) -> Layout:
    layout = draw(layouts(gpus_per_node, cp_choices=(1, 1, 2), vpp_choices=(1,)))
    return layout.replace(ep=draw(st.sampled_from([1, 2, 3, 4, 8, 16])), etp=draw(st.sampled_from([1, 1, 2, 4])))


MIXTRAL = ModelConfig(  # conf/model/mixtral-8x7b.yaml
    name="mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, swiglu=True, ffn_hidden=14336, seq_len=4096,
    max_position=32768, vocab=32000, tied_embeddings=False, norm="rmsnorm", num_experts=8, moe_topk=2)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(moe_models(), models()), expert_layouts(GPUS_PER_NODE))
@example(MIXTRAL, Layout(gpus=16, nodes=2, tp=2, pp=1, dp=8, ep=8, mbs=1, gbs=64, sequence_parallel=True))
@example(MIXTRAL, Layout(gpus=16, nodes=2, tp=2, pp=1, dp=8, ep=8, etp=2, mbs=1, gbs=64))    # no sp, ep*etp = 16
@example(MIXTRAL, Layout(gpus=8, nodes=1, tp=1, pp=2, dp=4, ep=3, mbs=1, gbs=64))             # 8 % 3
@example(ModelConfig(name="m", layers=4, hidden=256, heads=4, seq_len=1024),                # ep on a dense model
         Layout(gpus=4, nodes=1, tp=1, pp=1, dp=4, ep=2, mbs=1, gbs=8))
def test_expert_rules_agree_with_megatron_core(model, layout):
    compare_with_megatron(model, layout)


def test_sequence_parallel_needs_seq_divisible_by_tp_without_cp_too():
    """A disagreement the cross-check found: with cp = 1 the table let sequence parallelism through for a seq_len
    that tp does not divide (only the torch backend had the rule), and Megatron's scatter at the embedding fails."""
    model = ModelConfig(name="m", layers=4, hidden=512, heads=8, seq_len=1004)
    layout = Layout(gpus=8, nodes=1, tp=8, pp=1, dp=1, mbs=1, gbs=8, sequence_parallel=True)
    seen = compare_with_megatron(model, layout)
    assert seen["sequence_parallel_split"][0] and "divisible by tensor parallel size" in seen[
        "sequence_parallel_split"][1]
    assert check(model, CLUSTER, Layout(**{**layout.to_dict(), "tp": 4, "gpus": 4}), backend="megatron_lm").ok


def test_known_differences_are_real():
    """Each documented difference is met by a layout where megatron-core 0.16.1 accepts what the table refuses."""
    seen = compare_with_megatron(LLAMA_405B, Layout(gpus=64, nodes=8, tp=16, pp=4, dp=1, mbs=1, gbs=64))
    assert seen["query_groups"] == (True, None)
    seen = compare_with_megatron(LLAMA_405B, Layout(gpus=32, nodes=4, tp=8, pp=2, dp=2, vpp=3, mbs=1, gbs=64))
    assert seen["interleaving_needs_pipeline"] == (True, None)
    # ... and the 2024 behaviour is what --no-overlap-p2p-communication gives 0.16.1
    run = launch(LLAMA_405B, Layout(gpus=32, nodes=4, tp=8, pp=2, dp=2, vpp=3, mbs=1, gbs=64))
    run.args.overlap_p2p_comm = False
    assert "greater than 2" in interleaving_needs_pipeline(run)


# --- TP x CP: what Megatron enforces ------------------------------------------------------------------------------

# NVIDIA's Llama 3.1 405B pre-training recipe: NeMo nemo/collections/llm/recipes/llama31_405b.py (@00aa2e12),
# trainer() defaults tp 8, pp 9, vpp 2, cp 4, sequence parallel, 72 nodes x 8 GPUs, seq 8192, mbs 1; the same
# file's performance mode names a tp 8 x cp 2 communication-overlap setting (..._tp8_cp2_mbs1_seqlen8192).
# gbs 576 here: a multiple of mbs*dp*pp; the recipe's gbs 512 is refused below, by Megatron as by the table.
NVIDIA_405B = [Layout(gpus=576, nodes=72, tp=8, pp=9, dp=2, cp=4, vpp=2, mbs=1, gbs=576, recompute="none",
                      sequence_parallel=True, distributed_optimizer=True),
               Layout(gpus=576, nodes=72, tp=8, pp=9, dp=4, cp=2, vpp=2, mbs=1, gbs=576, recompute="none",
                      sequence_parallel=True, distributed_optimizer=True)]


@pytest.mark.parametrize("layout", NVIDIA_405B, ids=["tp8-cp4", "tp8-cp2"])
def test_nvidia_405b_layouts_run_and_tp_x_cp_across_nodes_is_only_a_warning(layout):
    """Megatron puts no node bound on tp x cp (parallel_state.py checks world % (tp*pp*cp), nothing per node):
    tp 8 x cp 2 or 4 on 8-GPU nodes runs, the ring exchange crossing nodes. The table warns (cp_node) and the
    step-time estimate prices the exchange at the network's bandwidth."""
    seen = compare_with_megatron(LLAMA_405B, layout)
    assert all(megatron is None for _, megatron in seen.values()), seen
    verdict = check(LLAMA_405B, CLUSTER, layout, backend="megatron_lm")
    assert verdict.ok, verdict.reasons
    assert "cp_node" in {w.code for w in verdict.warnings}
    # the same layout on 32-GPU nodes keeps tp x cp inside one: no warning, and a cheaper ring exchange
    wide = ClusterConfig(name="c", gpu="H100", gpus_per_node=32, nodes=18)
    inside = Layout(**{**layout.to_dict(), "nodes": 18})
    assert "cp_node" not in {w.code for w in check(LLAMA_405B, wide, inside, backend="megatron_lm").warnings}
    across_s = estimate(LLAMA_405B, CLUSTER, layout, "bf16", backend="megatron_lm").time_breakdown_s["cp_comm"]
    inside_s = estimate(LLAMA_405B, wide, inside, "bf16", backend="megatron_lm").time_breakdown_s["cp_comm"]
    assert across_s > inside_s > 0


def test_the_405b_recipes_own_batch_is_refused_by_megatron_and_the_table_alike():
    """gbs 512 with dp 2: 256 micro-batches, not a multiple of pp 9, which megatron-core 0.16.1's interleaved
    schedule refuses with its default micro-batch group (pp)."""
    layout = Layout(**{**NVIDIA_405B[0].to_dict(), "gbs": 512})
    seen = compare_with_megatron(LLAMA_405B, layout)
    assert seen["interleaved_schedule"][0] and "remainder of M=256 by N=9 is 4" in seen["interleaved_schedule"][1]


# --- DeepSpeed: the rendered ds_config.json ------------------------------------------------------------------------

class DataParallelMpu:
    """What Megatron-DeepSpeed hands deepspeed.initialize as mpu: DeepSpeedConfig reads its data-parallel size."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


def deepspeed_config(text: str, dp: int):
    """DeepSpeed's own parse of a ds_config.json for `dp` data-parallel ranks. DeepSpeedConfig asks the process
    group for the rank first and, without one, falls back to world size 1 and ignores the mpu: the rank is faked."""
    with mock.patch.object(ds_config_module.dist, "get_rank", lambda *args, **kwargs: 0):
        return ds_config_module.DeepSpeedConfig(json.loads(text), mpu=DataParallelMpu(dp))


MDS_MODEL = ModelConfig(name="m", layers=24, hidden=2048, heads=16, seq_len=2048, vocab=50257)


@st.composite
def deepspeed_layouts(draw) -> Layout:
    tp, pp, dp = (draw(st.sampled_from(choices)) for choices in ([1, 2, 4, 8], [1, 2, 3, 4], [1, 2, 3, 4, 8]))
    mbs = draw(st.sampled_from([1, 2, 4]))
    gbs = mbs * dp * draw(st.sampled_from([1, 2, 3, 8, 16])) + draw(st.sampled_from([0, 0, 0, 1, -1]))
    gpus = tp * pp * dp
    return Layout(gpus=gpus, nodes=-(-gpus // GPUS_PER_NODE), tp=tp, pp=pp, dp=dp, mbs=mbs, gbs=max(1, gbs),
                  recompute=draw(st.sampled_from(RECOMPUTE_MODES)), zero_stage=draw(st.sampled_from([0, 1, 2, 3])))


@settings(max_examples=200, deadline=None)
@given(deepspeed_layouts(), st.sampled_from(["bf16", "fp16", "fp32"]))
@example(Layout(gpus=16, nodes=2, tp=2, pp=2, dp=4, mbs=2, gbs=60), "bf16")     # gbs 60 % (2*4) != 0
def test_deepspeed_accepts_every_ds_config_we_render_and_agrees_on_the_batch(layout, precision):
    text = megatron_deepspeed.ds_config(backend_config("megatron_deepspeed", precision=precision), layout)
    table = {i.code for i in check(MDS_MODEL, CLUSTER, layout, backend="megatron_deepspeed").reasons}
    try:
        ds = deepspeed_config(text, layout.dp)
    except AssertionError as e:  # DeepSpeed's batch assertion (runtime/config.py _batch_assertion)
        assert "gbs_divisible" in table, (str(e), sorted(table))
        return
    assert "gbs_divisible" not in table, text
    assert ds.train_batch_size == layout.gbs == (ds.train_micro_batch_size_per_gpu * ds.gradient_accumulation_steps
                                                  * layout.dp)
    assert (ds.train_micro_batch_size_per_gpu, ds.gradient_accumulation_steps) == (layout.mbs, layout.microbatches)
    assert ds.zero_optimization_stage == layout.zero_stage and ds.zero_enabled == (layout.zero_stage > 0)
    assert (ds.bfloat16_config.enabled, ds.float16_config.enabled) == (precision == "bf16", precision == "fp16")
    # runtime/pipe/engine.py L76-77: 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'; the backend
    # runs DeepSpeed's PipelineEngine whenever pp > 1 (--no-pipeline-parallel only at pp = 1)
    pipeline_engine_refuses = layout.pp > 1 and ds.zero_optimization_stage >= ZeroStageEnum.gradients
    assert pipeline_engine_refuses == ("zero_pp" in table)


def test_deepspeed_refuses_a_config_whose_batch_does_not_multiply_out():
    """The check above can fail: DeepSpeed's arithmetic is train_batch = micro x accumulation x dp, with dp from
    the mpu, and the rendered file alone (dp 1) does not satisfy it."""
    layout = Layout(gpus=8, nodes=1, tp=1, pp=1, dp=8, mbs=2, gbs=64)
    text = megatron_deepspeed.ds_config(backend_config("megatron_deepspeed", precision="bf16"), layout)
    assert deepspeed_config(text, 8).gradient_accumulation_steps == 4
    with pytest.raises(AssertionError, match="64 != 2 \\* 4 \\* 1"):
        deepspeed_config(text, 1)

