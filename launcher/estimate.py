"""`python -m launcher.estimate`: the estimator as JSON lines in, JSON lines out (one answer per request line).

Each line names a model shape, a cluster preset (`gpu`), a GPU count and a layout; the answer holds the
constraint verdict and the predicted memory and throughput (launcher.plan.estimator). Optional keys: `precision`
(bf16), `flash_attention` (default: assumed for 16-bit, not for fp32) and `backend` (the software stack whose
fixed costs apply: torch, megatron_lm or megatron_deepspeed; default Megatron's). Light on purpose: no torch,
submitit, mlflow or hydra (presets are read with omegaconf).
"""

from __future__ import annotations

import functools
import json
import math
import sys
from dataclasses import dataclass, replace
from typing import IO, Any, Optional

from launcher.config.checks import check_cluster, check_model
from launcher.config.paths import conf_dir
from launcher.config.schema import BACKENDS, PRECISIONS, ClusterConfig, ModelConfig
from launcher.core import strict_json
from launcher.core.errors import ConfigError, ParasweepError
from launcher.core.layout import DIMENSIONS, Layout
from launcher.plan.estimator import Estimate, estimate
from launcher.plan.rules import check

__all__ = ["Estimate", "estimate", "load_cluster_preset", "main", "answer", "parse_request", "request_from_fields",
           "Request", "LineError", "FIELD_TYPES"]


# ----------------------------------------------------------------------------------------------- cluster presets

def cluster_preset_names() -> list[str]:
    return sorted(p.stem for p in (conf_dir() / "cluster").glob("*.yaml"))


@functools.cache
def _preset_fields(name: str) -> tuple[tuple[str, Any], ...]:
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(OmegaConf.load(conf_dir() / "cluster" / f"{name}.yaml"))
    assert isinstance(data, dict), f"conf/cluster/{name}.yaml is not a mapping"
    return tuple(sorted((str(k), v) for k, v in data.items()))


def load_cluster_preset(name: str) -> ClusterConfig:
    """conf/cluster/<name>.yaml as a ClusterConfig (a fresh object; change it with dataclasses.replace)."""
    names = cluster_preset_names()
    if name not in names:
        raise ConfigError("gpu", name, f"unknown cluster preset; valid: {', '.join(names)}")
    cluster = ClusterConfig(**dict(_preset_fields(name)))
    check_cluster(cluster)
    return cluster


# ----------------------------------------------------------------------------------------------- JSON-lines CLI

_INT, _BOOL, _STR = "int", "bool", "str"
# The layout's keys come from the Layout itself (its non-world dimensions, with their types and defaults; the world
# is n_gpus): a dimension added to the Layout is a key here too.
_LAYOUT_KEYS: dict[str, tuple[str, Any]] = {
    d.name: ({int: _INT, bool: _BOOL, str: _STR}[d.type], None if d.required or d.kind == "batch" else d.default)
    for d in DIMENSIONS if d.kind != "world"}
_REQUIRED_LAYOUT = tuple(d.name for d in DIMENSIONS if d.kind != "world" and (d.required or d.kind == "batch"))
"""The split sizes without a default (tp, pp, dp) and the batch: a request must give them (and recompute)."""
# key -> (type, default); default None with required=True below means the key must be given.
_FIELDS: dict[str, tuple[str, Any]] = {
    "layers": (_INT, None), "hidden": (_INT, None), "heads": (_INT, None), "seq_len": (_INT, None),
    "vocab": (_INT, None), "gpu": (_STR, None), "n_gpus": (_INT, None), **_LAYOUT_KEYS,
    "kv_heads": (_INT, None), "ffn_hidden": (_INT, None), "swiglu": (_BOOL, False), "gpus_per_node": (_INT, None),
    "precision": (_STR, "bf16"), "tied_embeddings": (_BOOL, True), "norm": (_STR, "layernorm"),
    "max_position": (_INT, None), "flash_attention": (_BOOL, None), "backend": (_STR, ""),
}
FIELD_TYPES = {key: kind for key, (kind, _) in _FIELDS.items()}
"""Request key -> 'int', 'bool' or 'str' (for readers of other formats, e.g. launcher.replay's CSV)."""
_REQUIRED = ("layers", "hidden", "heads", "seq_len", "vocab", "gpu", "n_gpus", *_REQUIRED_LAYOUT, "recompute")
_MAY_BE_ZERO = tuple(d.name for d in DIMENSIONS if d.dim.choices and 0 in d.dim.choices)
_OUTPUT_NUMBERS = ("peak_mem_gb", "headroom", "step_time_s", "tokens_per_s", "tflops_per_gpu",
                   "model_tflops_per_gpu", "mfu")


class LineError(ParasweepError):
    """One input line cannot be answered; `field` names the culprit (None: the line itself)."""

    def __init__(self, message: str, field: Optional[str]) -> None:
        super().__init__(message)
        self.field = field


def _typed(key: str, value: Any) -> Any:
    kind = _FIELDS[key][0]
    ok = {_INT: isinstance(value, int) and not isinstance(value, bool), _BOOL: isinstance(value, bool),
          _STR: isinstance(value, str)}[kind]
    if not ok:
        raise LineError(f"{key}={value!r}: expected {'an integer' if kind == _INT else 'a ' + kind}", key)
    if kind == _INT and (value < 0 or (value == 0 and key not in _MAY_BE_ZERO)):
        raise LineError(f"{key}={value}: must be {'>= 0' if key in _MAY_BE_ZERO else '> 0'}", key)
    return value


@dataclass(frozen=True)
class Request:
    """One parsed request: what `estimate()` needs, with the stack's a-priori constants."""

    model: ModelConfig
    cluster: ClusterConfig
    layout: Layout
    precision: str
    flash_attention: Optional[bool]
    backend: str
    id: Any = None

    def estimate(self, constants=None) -> Estimate:
        """The estimate with the backend's a-priori constants, or with `constants` (e.g. calibrated ones)."""
        return estimate(self.model, self.cluster, self.layout, self.precision, flash_attention=self.flash_attention,
                        backend=self.backend, constants=constants)


def parse_request(text: str) -> Request:
    """One JSON line -> Request. Raises LineError naming the field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LineError(f"not valid JSON: {exc.msg} (column {exc.colno})", None) from None
    if not isinstance(data, dict):
        raise LineError("expected a JSON object per line", None)
    return request_from_fields(data)


def request_from_fields(fields: dict) -> Request:
    """A request's keys (typed values; None = the default) -> Request. Raises LineError naming the field."""
    data = dict(fields)
    request_id = data.pop("id", None)
    if strict_json.finite(request_id) != request_id:  # NaN != NaN too: json.loads reads NaN and 1e999
        raise LineError(f"id={request_id!r}: NaN and Infinity are not JSON; use a string or a finite number", "id")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise LineError(f"unknown key {unknown[0]!r}; valid keys: {', '.join(_FIELDS)}, id", unknown[0])
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise LineError(f"missing required key {missing[0]!r} (required: {', '.join(_REQUIRED)})", missing[0])
    v = {k: (_typed(k, data[k]) if data.get(k) is not None else default) for k, (_, default) in _FIELDS.items()}
    if v["precision"] not in PRECISIONS:
        raise LineError(f"precision={v['precision']!r}: use one of {', '.join(PRECISIONS)}", "precision")
    if v["backend"] and v["backend"] not in BACKENDS:
        raise LineError(f"backend={v['backend']!r}: use one of {', '.join(BACKENDS)}", "backend")
    try:
        model = ModelConfig(name="jsonl", layers=v["layers"], hidden=v["hidden"], heads=v["heads"],
                            kv_heads=v["kv_heads"] or 0, ffn_hidden=v["ffn_hidden"] or 0, swiglu=v["swiglu"],
                            seq_len=v["seq_len"], max_position=v["max_position"] or 0, vocab=v["vocab"],
                            tied_embeddings=v["tied_embeddings"], norm=v["norm"])
        check_model(model)
        cluster = load_cluster_preset(v["gpu"])
    except ConfigError as exc:
        raise LineError(str(exc), exc.field.split(".")[-1]) from None
    per_node = v["gpus_per_node"] if v["gpus_per_node"] is not None else cluster.gpus_per_node
    nodes = math.ceil(v["n_gpus"] / per_node)
    cluster = replace(cluster, gpus_per_node=per_node, nodes=max(cluster.nodes, nodes))
    layout = Layout(gpus=v["n_gpus"], nodes=nodes, **{name: v[name] for name in _LAYOUT_KEYS})
    return Request(model, cluster, layout, v["precision"], v["flash_attention"], v["backend"], request_id)


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def answer(text: str) -> dict:
    """The output object for one valid-JSON request line (may raise LineError)."""
    request = parse_request(text)
    verdict = check(request.model, request.cluster, request.layout)
    out: dict[str, Any] = {"id": request.id} if request.id is not None else {}
    out.update(valid=verdict.ok, reasons=[i.message for i in verdict.reasons],
               warnings=[i.message for i in verdict.warnings])
    if not verdict.ok:
        out.update(dict.fromkeys(_OUTPUT_NUMBERS))
        return out
    est = request.estimate()
    out.update({k: _round(getattr(est, k)) for k in _OUTPUT_NUMBERS})
    return out


def main(stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> int:
    """Answer every non-blank line in order. A malformed line gets {"error", "line", "field"} and the others are
    still answered. Exit status 0 if at least one line was answered (or there was none), 2 if every line failed."""
    answered = failed = 0
    for number, text in enumerate(stdin, 1):
        if not text.strip():
            continue  # blank lines are not requests; "line" in error objects keeps the physical line number
        try:
            out = answer(text)
            answered += 1
        except LineError as exc:
            out, failed = {"error": str(exc), "line": number, "field": exc.field}, failed + 1
        except Exception as exc:  # a bug must not hide the other lines' answers; reported, never swallowed
            out, failed = {"error": f"internal error: {type(exc).__name__}: {exc}", "line": number,
                           "field": None}, failed + 1
        stdout.write(strict_json.dumps(out) + "\n")  # a number that overflowed: null, not Infinity
    stdout.flush()
    return 2 if failed and not answered else 0


if __name__ == "__main__":
    sys.exit(main())
