"""The shipped cluster presets agree with the datasheet table the estimator reads (launcher.plan.hardware.SPECS):
the preset's `gpu` is recognised, and its peak, memory bandwidth and capacity are that GPU's."""

from __future__ import annotations

import pytest

from launcher.config.paths import conf_dir
from launcher.core.names import is_cpu_standin
from launcher.estimate import load_cluster_preset
from launcher.plan.hardware import find_spec, fp8_peak_ratio

PRESETS = sorted(p.stem for p in (conf_dir() / "cluster").glob("*.yaml"))


def test_the_new_generations_have_presets():
    assert {"b200", "gb200", "h100-pcie"} <= set(PRESETS)


@pytest.mark.parametrize("name", [p for p in PRESETS if p != "local-cpu"])
def test_a_preset_is_its_gpu_s_datasheet_entry(name):
    cluster = load_cluster_preset(name)
    spec = find_spec(cluster.gpu)
    assert spec is not None and spec.name == name, (cluster.gpu, spec)
    assert cluster.peak_tflops == spec.bf16_tflops and cluster.hbm_gbytes_per_s == spec.hbm_gbytes_per_s
    # capacity as the process addresses it (nvidia-smi's MiB in 1e9 bytes), never the marketing figure
    assert cluster.gpu_mem_gb == round(spec.mem_gb, 1)


@pytest.mark.parametrize("name, fp8", [("a100-80g", False), ("h100-80g", True), ("h100-pcie", True), ("b200", True),
                                       ("gb200", True), ("v100-32g", False), ("local-cpu", False)])
def test_fp8_tensor_cores_by_preset(name, fp8):
    cluster = load_cluster_preset(name)
    assert (fp8_peak_ratio(cluster) is not None) == fp8
    assert is_cpu_standin(cluster.gpu) == (name == "local-cpu")
