"""The estimator against the H100 sweeps measured by parasweep's own loop (tests/data/h100_single_gpu_sweeps.csv):
a-priori errors, the micro-batch trend the fixed costs must reproduce, and the flash-attention OOM. The CSV also
holds the predictions of the estimator before these terms existed, so the improvement itself is checked."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest

from launcher.config.schema import ModelConfig
from launcher.core.layout import Layout
from launcher.estimate import estimate, load_cluster_preset

CSV = Path(__file__).parent.parent / "data" / "h100_single_gpu_sweeps.csv"
SHAPES = {"gpt-1.7b": (24, 2304, 24), "gpt-3.6b": (30, 3072, 32)}   # conf/model/*.yaml: layers, hidden, heads
H100 = load_cluster_preset("h100-80g")


def rows() -> list[dict]:
    with CSV.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def predict(row: dict):
    layers, hidden, heads = SHAPES[row["model"]]
    model = ModelConfig(name=row["model"], layers=layers, hidden=hidden, heads=heads, seq_len=2048, vocab=51200)
    layout = Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, mbs=int(row["mbs"]), gbs=int(row["gbs"]),
                    recompute=row["recompute"])
    return estimate(model, H100, layout, row["precision"], flash_attention=row["flash_attention"] == "True",
                    backend=row["backend"])


def errors(selected: list[dict], column: str = "") -> list[float]:
    out = []
    for r in selected:
        predicted = float(r[column]) if column else predict(r).step_time_s
        out.append(abs(predicted / float(r["measured_step_time_s"]) - 1))
    return out


def ok(backend: str, precision: str) -> list[dict]:
    return [r for r in rows() if r["state"] == "ok" and r["backend"] == backend and r["precision"] == precision]


def test_the_copy_names_its_source():
    text = CSV.read_text()
    assert text.startswith("# SOURCE:") and "Copied from" in text
    assert len(ok("torch", "bf16")) == 17


def test_embedded_workload_step_time_a_priori():
    """Step time off by a median 22 % (28 % in tokens/s), max 57 % before the fixed costs (the predicted column);
    now within 10 % / 20 %."""
    torch_rows = ok("torch", "bf16")
    before, after = errors(torch_rows, "predicted_step_time_s"), errors(torch_rows)
    assert statistics.median(before) > 0.2 and max(before) > 0.5
    assert statistics.median(after) <= 0.10, after
    assert max(after) <= 0.20, after


@pytest.mark.parametrize("recompute, measured_ratio", [("none", 0.5212 / 0.4093), ("full", 1.0472 / 0.4991)])
def test_micro_batch_trend(recompute, measured_ratio):
    """Throughput from mbs 1 to 8 at the same batch: 1.3x without and 2.1x with full recompute (measured); the
    estimate once predicted about 1 %."""
    by_mbs = {int(r["mbs"]): predict(r).step_time_s for r in ok("torch", "bf16")
              if r["model"] == "gpt-1.7b" and r["recompute"] == recompute}
    assert by_mbs[1] / by_mbs[8] == pytest.approx(measured_ratio, rel=0.15)


def test_fp32_on_the_gpu_runs_on_the_cuda_cores():
    fp32 = ok("torch", "fp32")
    assert statistics.median(errors(fp32, "predicted_step_time_s")) > 0.7     # predicted at bf16 speed before
    assert statistics.median(errors(fp32)) <= 0.10


def test_megatron_without_flash_attention_is_predicted_out_of_memory():
    """The mbs 8 Megatron-LM trial without flash attention was predicted to fit (69 GB) and ran out of memory."""
    (oom,) = [r for r in rows() if r["backend"] == "megatron_lm" and r["state"] == "oom"]
    assert float(oom["predicted_peak_mem_gb"]) < 80 < predict(oom).peak_mem_gb
    fitted = [r for r in rows() if r["backend"] == "megatron_lm" and r["state"] == "ok"]
    assert all(predict(r).peak_mem_gb < 80 for r in fitted)
    # slower than predicted before (no Transformer Engine, unfused softmax): closer now, the rest is calibration's
    assert statistics.median(errors(fitted)) < statistics.median(errors(fitted, "predicted_step_time_s"))


def allocated_gb(e) -> float:
    """The peak as torch.cuda.max_memory_allocated counts it (what the sweep measured): no CUDA context, no
    allocator fragmentation."""
    return e.peak_mem_gb - e.mem_breakdown_gb["context"] - e.mem_breakdown_gb["fragmentation"]


def test_memory_of_the_embedded_workload():
    """Median error 2-3 %; the largest (+14.5 %, mbs 8 with full recompute) is the loss buffers at the peak: the
    10 B per logit element counted for cross_entropy(logits.float()) are not all alive at once there."""
    torch_rows = ok("torch", "bf16")
    mem = [abs(allocated_gb(predict(r)) / float(r["measured_peak_mem_gb"]) - 1) for r in torch_rows]
    assert statistics.median(mem) <= 0.05 and max(mem) <= 0.15
    real_ooms = [r for r in rows() if r["backend"] == "torch" and r["precision"] == "bf16" and r["state"] == "oom"]
    assert real_ooms and all(predict(r).peak_mem_gb > 80 for r in real_ooms)
