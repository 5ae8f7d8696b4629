"""Failure kinds: a str Enum with its retry rules; RETRY_POLICY (the old tuples) is derived from it."""

import json

from analysis.logs.classify import FAILURE_KINDS, RETRY_POLICY, classify
from launcher.core.kinds import FailureKind


def test_kinds_compare_and_print_as_plain_strings():
    assert FailureKind.OOM == "oom" and FailureKind.OOM == "oom"
    assert str(FailureKind.COMM_ERROR) == "comm_error" and f"{FailureKind.HANG}" == "hang"
    assert json.dumps({"kind": FailureKind.OK}) == '{"kind": "ok"}'
    assert classify("", exit_code=2).kind == "config_error"


def test_retry_policy_is_derived_from_the_enum():
    assert set(RETRY_POLICY) == set(FAILURE_KINDS) == {k.value for k in FailureKind}
    for kind in FailureKind:
        assert RETRY_POLICY[kind.value] == (kind.retryable, kind.exclude_node, kind.max_retries)
        assert kind.description


def test_retry_rules():
    assert RETRY_POLICY["invalid_measurement"] == (True, False, 1)  # retried once, never ranked
    for kind in ("ok", "oom", "config_error"):
        assert RETRY_POLICY[kind] == (False, False, 0)
    for kind in ("node_failure", "comm_error", "preempted"):
        assert RETRY_POLICY[kind] == (True, True, None)
    assert RETRY_POLICY["hang"] == (True, False, 1)
    for kind in ("time_limit", "cancelled", "crashed", "unknown"):
        assert RETRY_POLICY[kind] == (True, False, None)
