"""launcher.core.objective and the other typed vocabularies: what each member means, and that each equals its
text (the ledger, MLflow and config.yaml files keep their strings)."""

from __future__ import annotations

import json

import pytest

from launcher.core.names import BackendName, ExecutorKind, Precision
from launcher.core.objective import OBJECTIVES, Objective
from launcher.core.states import JobState, TrialState


def test_the_per_gpu_objective_divides_by_the_gpus():
    assert Objective.tokens_per_s_per_gpu.score(800.0, 8) == 100.0
    assert Objective.tokens_per_s.score(800.0, 8) == Objective.time_to_target.score(800.0, 8) == 800.0
    assert Objective.tokens_per_s_per_gpu.comparable(800.0, 8, 4) == 400.0  # the best, in a 4-GPU trial's terms
    assert Objective.tokens_per_s.comparable(800.0, 8, 4) == 800.0


def test_rank_key_orders_by_score_then_headroom():
    key = Objective.tokens_per_s_per_gpu.rank_key
    assert sorted([(1000.0, 16, 0.5), (600.0, 8, 0.1), (600.0, 8, 0.3)], key=lambda t: key(*t)) == [
        (600.0, 8, 0.3), (600.0, 8, 0.1), (1000.0, 16, 0.5)]
    assert Objective.tokens_per_s.better(2.0, 1.0) and not Objective.tokens_per_s.better(1.0, 1.0)


def test_only_time_to_target_needs_a_target():
    assert [o for o in Objective if o.needs_target] == [Objective.time_to_target]
    assert OBJECTIVES == ("tokens_per_s", "tokens_per_s_per_gpu", "time_to_target")


@pytest.mark.parametrize("member, text", [(Objective.tokens_per_s, "tokens_per_s"), (BackendName.megatron_lm,
                                          "megatron_lm"), (ExecutorKind.slurm, "slurm"), (Precision.bf16, "bf16"),
                                          (TrialState.STOPPED_EARLY, "stopped_early"), (JobState.NODE_FAIL,
                                                                                         "NODE_FAIL")])
def test_members_equal_and_print_as_their_text(member, text):
    assert member == text and str(member) == text and f"{member}" == text and json.dumps(member) == f'"{text}"'


def test_sacct_states_parse_with_their_decorations():
    assert JobState.parse("CANCELLED by 0") is JobState.CANCELLED
    assert JobState.parse("OUT_OF_MEMORY+") is JobState.OUT_OF_MEMORY
    assert JobState.parse("SOMETHING_NEW") is JobState.FAILED  # over, and not ok
    assert JobState.RUNNING.live and not JobState.COMPLETED.live


def test_a_config_string_becomes_the_member(load):
    cfg = load("+sweep=70b", "plan.objective=tokens_per_s_per_gpu", "executor=slurm")
    assert cfg.plan.objective is Objective.tokens_per_s_per_gpu
    assert cfg.executor.name is ExecutorKind.slurm and cfg.backend.name is BackendName.megatron_deepspeed
