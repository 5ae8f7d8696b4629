"""The rules table: every Megatron/DeepSpeed/workload rule rejects with a named code and a message naming values and fix."""

from __future__ import annotations

import dataclasses

import pytest

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.plan.rules import Issue, Verdict, check

# GPT-style: 64 heads, h = 8192 (h/64 = 128), 48 layers, f = 4h, vocab a multiple of 128*8.
MODEL = dict(name="m", layers=48, hidden=8192, heads=64, kv_heads=8, seq_len=2048, vocab=51200)
CLUSTER = ClusterConfig(name="c", gpu="A100", gpus_per_node=8)
# 16 GPUs on 2 nodes: tp 4 x pp 2 x dp 2, 16 microbatches of mbs 2 (>= 4*pp: no bubble warning).
LAYOUT = dict(gpus=16, nodes=2, tp=4, pp=2, dp=2, vpp=1, mbs=2, gbs=64, recompute="selective")


def run(model: dict | None = None, allow_tp_across_nodes: bool = False, **layout) -> Verdict:
    return check(ModelConfig(**{**MODEL, **(model or {})}), CLUSTER, Layout(**{**LAYOUT, **layout}),
                 allow_tp_across_nodes=allow_tp_across_nodes)


def codes(issues: tuple[Issue, ...]) -> set[str]:
    return {i.code for i in issues}


def test_baseline_layout_is_clean():
    verdict = run()
    assert verdict.ok and verdict.reasons == () and verdict.warnings == ()


# (model overrides, layout overrides, expected code, text the message must contain)
REJECTIONS = [
    ({}, dict(dp=1), "world", "tp*pp*dp = 4*2*1 = 8 != gpus (16)"),
    ({}, dict(gpus=12, nodes=2, tp=2, pp=3, dp=2), "gpus_nodes",
     "gpus (12) do not match nodes (2) x gpus_per_node (8)"),
    ({}, dict(gpus=16, nodes=1, tp=4, pp=2, dp=2), "gpus_nodes", "gpus (16)"),
    ({}, dict(tp=16, pp=1, dp=1), "tp_node", "tp (16) > gpus_per_node (8)"),
    (dict(heads=60, kv_heads=60, hidden=7680), dict(tp=8, pp=2, dp=1, gbs=32), "heads_tp",
     "heads (60) not divisible by tp (8): pick tp dividing 60"),
    (dict(kv_heads=2), {}, "kv_heads_tp", "kv_heads (2) not divisible by tp (4)"),
    (dict(ffn_hidden=22018), {}, "ffn_tp", "ffn_hidden (22018) not divisible by tp (4)"),
    (dict(layers=45), {}, "layers_pp", "layers (45) not divisible by pp (2)"),
    ({}, dict(gbs=66), "gbs_divisible", "gbs (66) not divisible by mbs*dp = 2*2 = 4"),
    ({}, dict(tp=2, pp=4, dp=2, vpp=5, gbs=64), "layers_vpp", "layers (48) not divisible by pp*vpp = 4*5"),
    ({}, dict(tp=4, pp=1, dp=4, vpp=2), "vpp_pp", "needs pipeline parallelism (pp >= 2), pp is 1"),
    ({}, dict(tp=2, pp=4, dp=2, vpp=2, mbs=2, gbs=36), "vpp_microbatches",
     "microbatches (9 = gbs/(mbs*dp)) not a multiple of pp (4)"),
    ({}, dict(tp=1, pp=2, dp=8, gbs=64, mbs=1, sequence_parallel=True), "sp_tp", "sequence_parallel needs tp > 1"),
    (dict(seq_len=2050), dict(sequence_parallel=True), "cp_sp_seq",      # cp = 1: Megatron scatters s over tp too
     "seq_len (2050) not divisible by cp*tp = 4"),
    ({}, dict(zero_stage=2), "zero_pp", "ZeRO-2 with pp=2"),
    ({}, dict(zero_stage=3), "zero_pp", "incompatible with pipeline parallelism"),
    ({}, dict(zero_stage=4), "zero_stage", "zero_stage (4) must be one of 0, 1, 2, 3"),
    ({}, dict(zero_stage=1, distributed_optimizer=True), "distopt_zero", "pick one"),
    ({}, dict(recompute="partial"), "recompute", "recompute ('partial') must be one of none, selective, full"),
    ({}, dict(recompute_every=2), "recompute_every_full", "recompute_every (2) with recompute=selective"),
    ({}, dict(recompute="full", recompute_every=5), "recompute_every_layers",
     "recompute_every (5) does not divide the 24 layers of each model chunk"),
    ({}, dict(tp=2, pp=4, dp=2, vpp=3, recompute="full", recompute_every=8), "recompute_every_layers",
     "does not divide the 4 layers of each model chunk (layers/(pp*vpp) = 48/(4*3))"),
    ({}, dict(recompute_every=0), "positive", "recompute_every=0"),
    (dict(max_position=1024), {}, "max_position", "max_position (1024) < seq_len (2048)"),
    (dict(hidden=8200), {}, "hidden_heads", "hidden (8200) not divisible by heads (64)"),
    ({}, dict(ep=2), "ep_dense", "ep (2) splits experts, but the model is dense"),
    ({}, dict(etp=2), "etp_dense", "etp (2) splits experts, but the model is dense"),
    (dict(num_experts=6), dict(ep=4), "experts_ep", "num_experts (6) not divisible by ep (4)"),
    (dict(num_experts=16), dict(ep=16), "ep_world", "ep*etp = 16*1 = 16 does not divide tp*cp*dp = 4*1*2 = 8"),
    (dict(num_experts=8), dict(ep=4, etp=4), "ep_world", "ep*etp = 4*4 = 16 does not divide"),
    (dict(num_experts=8, moe_ffn_hidden=1004), dict(etp=8), "moe_ffn_etp",
     "moe_ffn_hidden (1004) not divisible by etp (8)"),
    (dict(num_experts=8, shared_expert_ffn_hidden=1002), {}, "shared_expert_tp",
     "shared_expert_ffn_hidden (1002) not divisible by tp (4)"),
    ({}, dict(mbs=0), "positive", "mbs=0"),
    ({}, dict(tp=-1), "positive", "tp=-1"),
]


@pytest.mark.parametrize("model, layout, code, text", REJECTIONS, ids=[r[2] + "-" + str(i) for i, r in
                                                                        enumerate(REJECTIONS)])
def test_each_rule_rejects_with_its_code_and_values(model, layout, code, text):
    verdict = run(model, **layout)
    assert not verdict.ok
    assert code in codes(verdict.reasons)
    messages = " | ".join(i.message for i in verdict.reasons)
    assert text in messages


def test_interleaving_accepted_when_all_its_rules_hold():
    # 48 layers = pp 4 x vpp 3 x 4 layers; 16 microbatches = 4 x pp
    assert run(tp=2, pp=4, dp=2, vpp=3, mbs=2, gbs=64).ok


def test_tp_across_nodes_only_when_allowed():
    mha = dict(kv_heads=64)
    assert codes(run(mha, tp=16, pp=1, dp=1).reasons) == {"tp_node"}
    assert run(mha, tp=16, pp=1, dp=1, allow_tp_across_nodes=True).ok


def test_recompute_every_kth_layer_needs_full_recompute_and_a_divisor_of_the_chunk():
    # 48 layers over pp 2: 24 per stage; k = 2, 3, 4, 6, 8, 12, 24 divide it
    assert all(run(recompute="full", recompute_every=k).ok for k in (1, 2, 3, 24))
    assert not run(recompute="full", recompute_every=48).ok
    # Megatron-DeepSpeed: DeepSpeed's pipeline engine has no block method; without a pipeline it runs
    lay = dict(recompute="full", recompute_every=2)
    mds = check(ModelConfig(**MODEL), CLUSTER, Layout(**{**LAYOUT, **lay}), backend="megatron_deepspeed")
    assert codes(mds.reasons) == {"mds_recompute_every"}
    flat = check(ModelConfig(**MODEL), CLUSTER, Layout(**{**LAYOUT, **lay, "pp": 1, "dp": 4}),
                 backend="megatron_deepspeed")
    assert flat.ok


def test_zero_2_allowed_without_pipeline_and_zero_1_with_it():
    assert run(tp=4, pp=1, dp=4, gbs=64, zero_stage=3).ok
    assert run(zero_stage=1).ok
    assert run(distributed_optimizer=True).ok


def test_several_problems_are_all_reported():
    verdict = run(dict(layers=45), dp=1, gbs=65)
    assert {"world", "layers_pp", "gbs_divisible"} <= codes(verdict.reasons)


def test_gemm_width_warnings_name_the_shard_width():
    # h = 2304 (GPT-1.7B), 24 heads, tp 8 -> h/tp = 288 (288 % 64 = 32); f = 9216 / 8 = 1152 = 18 x 64 (fine)
    verdict = run(dict(hidden=2304, heads=24, kv_heads=24, layers=24), tp=8, pp=1, dp=2, gbs=64)
    assert verdict.ok
    assert codes(verdict.warnings) == {"gemm_hidden_tp"}
    assert "hidden/tp = 2304/8 = 288" in verdict.warnings[0].message
    ffn = run(dict(ffn_hidden=4 * 8192 + 32 * 4), tp=4)   # 32896 / 4 = 8224 = 128*64 + 32
    assert "gemm_ffn_tp" in codes(ffn.warnings)


def test_vocab_padding_warning_names_the_padded_size():
    verdict = run(dict(vocab=50257))   # tp 4: pad to a multiple of 512 -> 50688
    assert verdict.ok
    (issue,) = [w for w in verdict.warnings if w.code == "gemm_vocab"]
    assert "50688" in issue.message and "431 padding rows" in issue.message


def test_bubble_warning_gives_the_bubble_share():
    # pp 2, m = 64 / (8*2) = 4 < 4*pp = 8: bubble (2-1)/(1*4) = 25 %
    verdict = run(mbs=8, gbs=64)
    assert verdict.ok
    (issue,) = verdict.warnings
    assert issue.code == "bubble" and "bubble (p-1)/(v*m) = 25%" in issue.message
    assert not run(mbs=4, gbs=64).warnings     # m = 8 = 4*pp: no warning


def test_issue_and_verdict_are_frozen_slotted_values():
    verdict = run(dp=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.reasons = ()
    assert not hasattr(verdict.reasons[0], "__dict__")


# --- the table itself ------------------------------------------------------------------------------------------

from hypothesis import example, given, settings
from hypothesis import strategies as st

from launcher.core.layout import NAMES, RECOMPUTE_MODES
from launcher.plan.rules import ALL_RULES, Checker, Facts, rules_for

SMALL = st.sampled_from([1, 2, 3, 4, 8])
LAYOUTS = st.builds(Layout, gpus=st.sampled_from([1, 2, 4, 8, 16, 32]), nodes=st.sampled_from([1, 2, 4]),
                    tp=SMALL, pp=SMALL, dp=SMALL, vpp=st.sampled_from([1, 2, 3]), mbs=st.sampled_from([1, 2, 4]),
                    gbs=st.sampled_from([4, 8, 12, 16, 64]), recompute=st.sampled_from(RECOMPUTE_MODES),
                    recompute_every=st.sampled_from([1, 1, 2, 3]),
                    sequence_parallel=st.booleans(), zero_stage=st.sampled_from([0, 1, 2, 3]),
                    distributed_optimizer=st.booleans(), ep=st.sampled_from([1, 1, 2, 4]),
                    etp=st.sampled_from([1, 1, 2]))
FACTS = Facts(ModelConfig(name="m", layers=12, hidden=768, heads=12, kv_heads=4, seq_len=1024, vocab=50257,
                          max_position=512), gpus_per_node=8, cluster_nodes=2)


def test_rule_codes_are_unique_and_every_rule_names_its_source():
    codes_seen = [r.code for r in ALL_RULES]
    assert len(codes_seen) == len(set(codes_seen))
    assert all(r.source and set(r.reads) <= set(NAMES) for r in ALL_RULES)


@settings(max_examples=300, deadline=None)
@given(LAYOUTS, LAYOUTS)
def test_a_rule_reads_only_the_fields_it_declares(a, b):
    """The Checker caches a rule's verdict per value tuple of its `reads`: a layout that agrees on those fields
    must get the same verdict and message, whatever its other fields."""
    for rule in ALL_RULES:
        mixed = dataclasses.replace(b, **{name: getattr(a, name) for name in rule.reads})
        assert rule.broken(FACTS, mixed) == rule.broken(FACTS, a), rule.code
        if rule.broken(FACTS, a):
            assert rule.message(FACTS, mixed) == rule.message(FACTS, a), rule.code


CLUSTER = ClusterConfig(name="c", gpu="A100", gpus_per_node=8, nodes=2)
FITTING = dataclasses.replace(FACTS.model, max_position=1024)  # so that one group alone can hold every issue
SHARED = {backend: Checker(FITTING, CLUSTER, backend) for backend in ("megatron_lm", "megatron_deepspeed")}
# A grid with few values per field: every rule group merged into one (launcher.plan.rules.MERGED_KEYS)
SHARED["megatron_lm merged"] = Checker(FITTING, CLUSTER, "megatron_lm", key_space=dict.fromkeys(NAMES, 2))


@settings(max_examples=300, deadline=None)
@given(LAYOUTS, st.sampled_from(sorted(SHARED)))
@example(Layout(gpus=8, nodes=1, tp=8, pp=1, dp=1, mbs=1, gbs=8), "megatron_lm")  # two issues from one group
def test_the_cached_checker_agrees_with_evaluating_every_rule(layout, backend):
    """One checker across all examples, as a plan keeps it: its caches (rules grouped by the fields they read,
    groups merged into supersets) are warm from other layouts that share some of those fields."""
    checker = SHARED[backend]
    backend = backend.split()[0]
    for _ in range(2):  # second time from the cache
        verdict = checker.check(layout)
        if min(layout.gpus, layout.nodes, layout.tp, layout.pp, layout.dp, layout.vpp, layout.mbs, layout.gbs) < 1:
            assert [i.code for i in verdict.reasons] == ["positive"]
            continue
        broken = [r for r in rules_for(backend) if r.broken(checker.facts, layout)]  # in table order
        rejections = [r for r in broken if not r.warning]
        assert verdict.ok == (not rejections)
        assert (verdict.first_reason.code if verdict.first_reason else None) == (
            rejections[0].code if rejections else None)  # read first, before the full verdict is merged
        assert [i.code for i in verdict.reasons] == [r.code for r in broken if not r.warning]
        assert [i.code for i in verdict.warnings] == [r.code for r in broken if r.warning]
        assert [i.message for i in verdict.reasons + verdict.warnings] == [
            r.message(checker.facts, layout) for r in broken if not r.warning] + [
            r.message(checker.facts, layout) for r in broken if r.warning]


def test_backend_rules_apply_to_their_backend_only():
    lay = dict(tp=4, pp=4, dp=1, vpp=2, gbs=64)       # interleaved 1F1B, 16 micro-batches = 4 x pp
    assert run(**lay).ok                              # the general rules accept it
    mds = check(ModelConfig(**MODEL), CLUSTER, Layout(**{**LAYOUT, **lay}), backend="megatron_deepspeed")
    assert codes(mds.reasons) == {"mds_vpp"}          # DeepSpeed's PipelineEngine has no interleaving
    mlm = check(ModelConfig(**MODEL), CLUSTER, Layout(**{**LAYOUT, **lay, "pp": 2, "tp": 4, "dp": 2}),
                backend="megatron_lm")
    assert "vpp_pp_overlap" in codes(mlm.reasons)     # Megatron-LM asserts pp > 2 with interleaving
    torch_ = check(ModelConfig(**MODEL), CLUSTER, Layout(**{**LAYOUT, **lay, "pp": 2, "tp": 4, "dp": 2}),
                   backend="torch")
    assert torch_.ok                                  # torch's ScheduleInterleaved1F1B runs pp = 2


MOE = dict(num_experts=8, moe_topk=2)


def test_expert_rules_of_each_backend():
    moe = ModelConfig(**{**MODEL, **MOE})
    lay = Layout(**{**LAYOUT, "ep": 2})                  # tp 4 without sequence parallelism
    assert check(moe, CLUSTER, lay).ok                   # the general rules accept ep 2 of 8 experts
    assert codes(check(moe, CLUSTER, lay, backend="megatron_lm").reasons) == {"moe_tp_sp"}
    assert check(moe, CLUSTER, lay.replace(sequence_parallel=True), backend="megatron_lm").ok
    assert check(ModelConfig(**MODEL), CLUSTER, Layout(**LAYOUT), backend="megatron_lm").ok   # dense: no SP needed
    assert codes(check(moe, CLUSTER, lay, backend="megatron_deepspeed").reasons) == {"mds_moe"}
    assert check(ModelConfig(**MODEL), CLUSTER, Layout(**LAYOUT), backend="megatron_deepspeed").ok
    zero2 = Layout(**{**LAYOUT, "pp": 1, "dp": 4, "zero_stage": 2})
    assert codes(check(moe, CLUSTER, zero2, backend="torch").reasons) == {"moe_zero"}
    assert check(moe, CLUSTER, zero2, backend="megatron_deepspeed").reasons[0].code != "moe_zero"
    odd = ModelConfig(**{**MODEL, **MOE, "seq_len": 2050})
    assert codes(check(odd, CLUSTER, Layout(**LAYOUT), backend="torch").reasons) == {"moe_seq_tp"}


def test_expert_group_across_nodes_is_a_warning_naming_the_sizes():
    moe = ModelConfig(**{**MODEL, **MOE})
    inside = check(moe, CLUSTER, Layout(**{**LAYOUT, "tp": 2, "dp": 4, "ep": 4, "etp": 2}))
    assert inside.ok and "ep_node" not in codes(inside.warnings)
    across = check(moe, CLUSTER, Layout(**{**LAYOUT, "tp": 2, "pp": 1, "dp": 8, "ep": 8, "etp": 2}))
    assert across.ok
    (warning,) = [w for w in across.warnings if w.code == "ep_node"]
    assert "ep*etp = 8*2 = 16 > gpus_per_node (8)" in warning.message


def test_the_cluster_size_limits_the_nodes():
    cluster = ClusterConfig(name="c", gpu="A100", gpus_per_node=8, nodes=1)
    verdict = Checker(ModelConfig(**MODEL), cluster).check(Layout(**LAYOUT))   # 2 nodes on a 1-node cluster
    assert "too_many_nodes" in codes(verdict.reasons) and "cluster.nodes" in verdict.reasons[0].message


# --- the embedded workload's own argument check agrees with the table ----------------------------------------

# The rules the workload's validate() enforces itself (launcher/workload/__main__.py); the rest (cluster shape,
# DeepSpeed/Megatron specifics, warnings) are the planner's and the launch script's to enforce.
WORKLOAD_ENFORCES = {"world", "heads_tp", "kv_heads_tp", "ffn_tp", "layers_pp", "hidden_heads", "gbs_divisible",
                     "layers_vpp", "vpp_pp", "vpp_microbatches", "pp_microbatches", "cp_sp_seq", "vocab_tp",
                     "recompute_every_full", "recompute_every_layers"}
TINY_SHAPES = st.builds(lambda layers, heads, kv, ffn, seq, vocab: ModelConfig(
    name="t", layers=layers, hidden=64 * heads, heads=heads, kv_heads=kv, ffn_hidden=ffn, seq_len=seq, vocab=vocab),
    st.sampled_from([2, 3, 4, 6, 8]), st.sampled_from([4, 8]), st.sampled_from([2, 4]),
    st.sampled_from([256, 384, 1000]), st.sampled_from([64, 96, 128]), st.sampled_from([1000, 1024]))


@settings(max_examples=400, deadline=None)
@given(TINY_SHAPES, LAYOUTS)
def test_workload_refuses_exactly_what_the_table_refuses_for_it(model, layout):
    from launcher.backends.torch_workload import workload_args
    from launcher.config.schema import BackendConfig
    from launcher.workload.__main__ import build_parser, validate

    layout = dataclasses.replace(layout, nodes=1, gpus=layout.world)
    cluster = ClusterConfig(name="cpu", gpu="cpu", gpus_per_node=64)
    verdict = check(model, cluster, layout, backend="torch")
    table_refuses = bool(set(codes(verdict.reasons)) & WORKLOAD_ENFORCES)
    argv = workload_args(model, cluster, BackendConfig(name="torch", precision="fp32"), layout, 0)
    problem = validate(build_parser().parse_args(argv), world_size=layout.gpus)
    assert (problem is not None) == table_refuses, (problem, codes(verdict.reasons))


def test_the_first_reason_is_the_most_basic_rule_and_every_fix_is_possible():
    """Issue 20: tp=3 on a 64-head model on 64 GPUs was named for its world (63 != 64, 'pick dp = gpus/(tp*pp)',
    which no integer dp can be) before its heads; tp*pp above the GPU count said 'sizes must be >= 1 ... dp=0'."""
    verdict = run(gpus=64, nodes=8, tp=3, pp=1, dp=21, gbs=42, mbs=1)
    assert {"heads_tp", "world"} <= codes(verdict.reasons)
    assert verdict.first_reason.code == "heads_tp" and "heads (64) not divisible by tp (3)" in verdict.first_reason.message
    world = next(i.message for i in verdict.reasons if i.code == "world")
    assert "tp*pp = 3 does not divide gpus (64), so no dp fits: pick tp*pp dividing 64" in world, world
    assert "pick dp = gpus/(tp*pp) = 2 or change gpus" in run(dp=1).first_reason.message  # 4*2 divides 16
    too_many = run(gpus=16, nodes=2, tp=8, pp=4, dp=0).first_reason
    assert too_many.code == "positive" and "dp=0" not in too_many.message
    assert "tp*pp = 8*4 = 32 > gpus (16): no dp >= 1 fits; pick tp*pp <= 16 or use 32 gpus or more" in \
        too_many.message, too_many.message


MOE_ENFORCES = WORKLOAD_ENFORCES | {"experts_ep", "ep_world", "moe_ffn_etp", "shared_expert_tp", "moe_seq_tp",
                                    "moe_zero"}
TINY_MOE = st.builds(lambda model, experts, topk, ffn, shared: dataclasses.replace(
    model, num_experts=experts, moe_topk=min(topk, experts), moe_ffn_hidden=ffn, shared_expert_ffn_hidden=shared),
    TINY_SHAPES, st.sampled_from([1, 2, 4, 6, 8]), st.sampled_from([1, 2]), st.sampled_from([64, 96, 100]),
    st.sampled_from([0, 0, 128, 130]))


@settings(max_examples=300, deadline=None)
@given(TINY_MOE, LAYOUTS)
def test_workload_refuses_exactly_what_the_table_refuses_for_an_moe_model(model, layout):
    from launcher.backends.torch_workload import workload_args
    from launcher.config.schema import BackendConfig
    from launcher.workload.__main__ import build_parser, validate

    layout = dataclasses.replace(layout, nodes=1, gpus=layout.world)
    cluster = ClusterConfig(name="cpu", gpu="cpu", gpus_per_node=64)
    verdict = check(model, cluster, layout, backend="torch")
    table_refuses = bool(set(codes(verdict.reasons)) & MOE_ENFORCES)
    argv = workload_args(model, cluster, BackendConfig(name="torch", precision="fp32"), layout, 0)
    problem = validate(build_parser().parse_args(argv), world_size=layout.gpus)
    assert (problem is not None) == table_refuses, (problem, codes(verdict.reasons))
