import pytest

from launcher.core.layout import Layout
from launcher.core.record import TrialRecord
from launcher.core.states import state_for_kind
from launcher.run.policy import dominated_by_oom, needs_more_memory, should_retry

BASE = dict(gpus=4, nodes=1, tp=1, pp=1, dp=4, vpp=1, mbs=2, gbs=64, recompute="none", sequence_parallel=False,
            zero_stage=0, distributed_optimizer=False)


def lay(**kw):
    return Layout(**{**BASE, **kw})


def test_larger_mbs_same_layout_needs_more_memory():
    assert needs_more_memory(lay(mbs=4), lay(mbs=2))
    assert not needs_more_memory(lay(mbs=1), lay(mbs=2))
    assert not needs_more_memory(lay(mbs=4, recompute="full"), lay(mbs=2))
    assert not needs_more_memory(lay(mbs=4, tp=2, dp=2), lay(mbs=2))


def test_pipeline_in_flight_counts():
    # pp=4: mbs 2 with 8 micro-batches holds 4 in flight (2*4=8); mbs 8 with 2 micro-batches holds 2 (8*2=16).
    oomed = lay(pp=4, dp=1, mbs=2, gbs=16)
    assert needs_more_memory(lay(pp=4, dp=1, mbs=8, gbs=16), oomed)


def test_dominated_by_oom_names_the_trial():
    oom = TrialRecord("oom1", 0, lay(mbs=2), state="oom")
    cand = TrialRecord("c", 1, lay(mbs=8))
    assert dominated_by_oom(cand, [oom, cand]) is oom
    assert dominated_by_oom(TrialRecord("d", 2, lay(mbs=1)), [oom]) is None


@pytest.mark.parametrize("state, kind, attempts, expected", [
    ("oom", "oom", 1, False), ("failed", "config_error", 1, False), ("ok", "ok", 1, False),
    ("failed", "comm_error", 1, True), ("failed", "comm_error", 2, False), ("cancelled", "cancelled", 1, True),
    ("timeout", "time_limit", 1, True), ("hang", "hang", 1, True), ("hang", "hang", 2, False),
    ("failed", "node_failure", 1, True), ("failed", "preempted", 1, True), ("planned", "", 0, False),
    ("stopped_early", "", 1, False),   # known worse than the best: running it again buys nothing
])
def test_retry_policy(state, kind, attempts, expected):
    assert should_retry(TrialRecord("x", 0, lay(), state=state, failure_kind=kind, attempts=attempts), 2) is expected


def test_hang_is_retried_once_even_with_more_attempts():
    r = TrialRecord("x", 0, lay(), state="hang", failure_kind="hang", attempts=2)
    assert not should_retry(r, 5)
    assert should_retry(TrialRecord("x", 0, lay(), state="failed", failure_kind="crashed", attempts=2), 5)


def test_kinds_map_to_ledger_states():
    assert [state_for_kind(k) for k in ("ok", "oom", "time_limit", "hang", "cancelled", "comm_error", "crashed")] == \
        ["ok", "oom", "timeout", "hang", "cancelled", "failed", "failed"]
