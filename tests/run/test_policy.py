import pytest

from launcher.core.layout import Layout
from launcher.core.record import TrialRecord
from launcher.core.states import state_for_kind
from launcher.run.policy import OomIndex, ShapeIndex, dominated_by_oom, needs_more_memory, should_retry

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


def test_the_oom_index_answers_as_a_scan_of_every_record():
    """The loop asks the index (built once a poll) instead of scanning every record per planned trial: the same
    trial must rule out the same candidates, the first one in record order when several do."""
    shapes = [lay(mbs=m, gbs=g, tp=t, dp=4 // t, recompute=rc) for m in (1, 2, 4, 8) for g in (64, 128)
              for t in (1, 2) for rc in ("none", "full")]
    records = [TrialRecord(str(i), i, layout, state="oom" if i % 3 == 0 else "ok") for i, layout in enumerate(shapes)]
    index = OomIndex(records)
    ruled_out = 0
    for cand in (TrialRecord(f"c{i}", i, layout) for i, layout in enumerate(shapes)):
        scan = next((r for r in records if r.state.value == "oom" and needs_more_memory(cand.layout, r.layout)),
                    None)
        assert index.dominating(cand) is scan
        ruled_out += scan is not None
    assert ruled_out  # the grid has dominated candidates: the comparison is not vacuous


def test_the_dominated_pass_names_what_dominating_names_for_every_planned_record():
    """OomIndex.dominated (one pass a poll, the loop's) equals OomIndex.dominating asked per planned record; the
    records that are not planned are never in it."""
    shapes_of = [lay(mbs=m, gbs=g, tp=t, dp=4 // t, recompute=rc) for m in (1, 2, 4, 8) for g in (64, 128)
                 for t in (1, 2) for rc in ("none", "full")]
    records = [TrialRecord(str(i), i, layout, state="oom" if i % 3 == 0 else "ok")
               for i, layout in enumerate(shapes_of)]
    records += [TrialRecord(f"c{i}", len(records) + i, layout, state="planned" if i % 5 else "failed")
                for i, layout in enumerate(shapes_of)]
    index = OomIndex(records)
    want = {r.config_hash: oom for r in records if r.state.value == "planned"
            if (oom := index.dominating(r)) is not None}
    assert index.dominated(records) == want and want
    assert all(index.dominated(records)[key] is oom for key, oom in want.items())
    assert OomIndex([r for r in records if r.state.value != "oom"]).dominated(records) == {}
    shapes = ShapeIndex()   # the loop's: only the records of the shapes that ran out of memory are read
    assert index.dominated(records, shapes) == want
    grown = [*records, *(TrialRecord(f"n{i}", len(records) + i, layout) for i, layout in enumerate(shapes_of))]
    grown_index = OomIndex(grown)
    assert grown_index.dominated(grown, shapes) == grown_index.dominated(grown) != want   # the index follows
