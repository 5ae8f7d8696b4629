"""launcher.netbench: bus-bandwidth conventions, the estimator's view of a probe, the cache, and real runs through
torch.distributed (gloo) on this machine, two emulated nodes, and the local SLURM cluster's two nodes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.estimate import load_cluster_preset
from launcher.netbench import (
    SCHEMA,
    Measurement,
    NetworkProfile,
    ProbeError,
    ProbeResult,
    apply_network,
    bus_factor,
    cache_name,
    find_cached,
    format_tables,
    load,
    probe_script,
    save,
    summarize,
    sweep_folders,
)
from launcher.plan import step_time as st
from launcher.plan.constants import DEFAULT

REPO = Path(__file__).resolve().parents[2]


def probe(nodes=2, created_at=1.0, cluster="a100-80g", intra_s=1e-3, inter_s=4e-3,
          all_to_all=False) -> ProbeResult:
    ms = []
    for scope, ranks, t in (("intra_node", 8, intra_s), ("inter_node", 16, inter_s)):
        for size in (1 << 10, 1 << 20, 1 << 24, 1 << 26, 1 << 28):
            ms.append(Measurement("all_reduce", scope, ranks, size, 2e-5 + size / 1e9 * t))
            if all_to_all:  # twice as slow per byte as the all-reduce
                ms.append(Measurement("all_to_all", scope, ranks, size, 2e-5 + size / 1e9 * 2 * t))
        ms.append(Measurement("sendrecv", scope, 2, 1 << 20, 1e-4))
    return ProbeResult(cluster, nodes, 8, "nccl", "A100", ("a", "b"), tuple(ms), created_at, "2.13")


def test_bus_factors_are_nccl_tests_ones():
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == pytest.approx(7 / 8)
    assert bus_factor("sendrecv", 2) == 1.0
    assert bus_factor("all_to_all", 8) == pytest.approx(7 / 8)      # nccl-tests alltoall: (n-1)/n
    m = Measurement("all_reduce", "intra_node", 4, 10**9, 0.5)
    assert m.algbw_gbytes_per_s == pytest.approx(2.0) and m.busbw_gbytes_per_s == pytest.approx(3.0)
    with pytest.raises(ValueError):
        bus_factor("broadcast", 2)


def test_summary_takes_the_large_message_plateau_and_the_small_message_latency():
    result = probe(intra_s=1e-2, inter_s=4e-2)
    p = summarize(result)
    # all_reduce time = 2e-5 + S·t/1e9 s: busbw rises towards 2·(n-1)/n / t GB/s; the summary is the median of
    # the three largest sizes (16, 64, 256 MiB), i.e. the 64 MiB one
    sixty_four = {m.scope: m.busbw_gbytes_per_s for m in result.measurements if m.bytes == 1 << 26}
    assert p.intra_node_gbytes_per_s == sixty_four["intra_node"]
    assert 0.95 * 2 * 7 / 8 / 1e-2 < p.intra_node_gbytes_per_s < 2 * 7 / 8 / 1e-2
    assert 0.95 * 2 * 15 / 16 / 4e-2 < p.inter_node_gbytes_per_s < 2 * 15 / 16 / 4e-2
    assert p.latency_s == pytest.approx(2e-5 + 1024 / 1e9 * 4e-2)     # smallest inter-node all_reduce
    single = summarize(ProbeResult("x", 1, 8, "nccl", "A100", ("a",), tuple(
        m for m in probe().measurements if m.scope == "intra_node")))
    assert single.inter_node_gbytes_per_s is None and single.latency_s == pytest.approx(2e-5 + 1024 / 1e9 * 1e-3)


def test_all_to_all_has_its_own_plateau_and_old_probes_have_none():
    result = probe(intra_s=1e-2, inter_s=4e-2, all_to_all=True)
    p = summarize(result)
    plateau = {m.scope: m.busbw_gbytes_per_s for m in result.measurements if m.bytes == 1 << 26
               and m.op == "all_to_all"}
    assert p.intra_node_all_to_all_gbytes_per_s == plateau["intra_node"]
    assert p.inter_node_all_to_all_gbytes_per_s == plateau["inter_node"]
    assert 0.95 * 7 / 8 / 2e-2 < p.intra_node_all_to_all_gbytes_per_s < 7 / 8 / 2e-2
    # the all-reduce summary and the latency are the all-reduce's alone, as before
    base = summarize(probe(intra_s=1e-2, inter_s=4e-2))
    assert (p.intra_node_gbytes_per_s, p.inter_node_gbytes_per_s, p.latency_s) == (
        base.intra_node_gbytes_per_s, base.inter_node_gbytes_per_s, base.latency_s)
    old = summarize(probe())
    assert old.intra_node_all_to_all_gbytes_per_s is None and old.inter_node_all_to_all_gbytes_per_s is None
    text = format_tables(result)
    assert "# all_to_all, intra-node, 8 ranks" in text and "intra-node all_to_all bus bandwidth" in text
    assert "all_to_all bus bandwidth" not in format_tables(probe())


def test_a_probe_file_written_before_all_to_all_still_loads(tmp_path):
    """Backward compatibility: the file of an older probe (no all_to_all rows, no all_to_all summary keys)."""
    data = probe().to_json()
    for key in ("intra_node_all_to_all_gbytes_per_s", "inter_node_all_to_all_gbytes_per_s",
                "intra_node_all_to_all_gbit_per_s", "inter_node_all_to_all_gbit_per_s"):
        del data["summary"][key]
    (tmp_path / "old.json").write_text(json.dumps(data))
    loaded = load(tmp_path / "old.json")
    assert loaded == probe() and loaded.profile().intra_node_gbytes_per_s == probe().profile().intra_node_gbytes_per_s
    new = probe(all_to_all=True).to_json()
    assert set(data) == set(new) and set(data["summary"]) < set(new["summary"])  # new keys only
    assert new["summary"]["inter_node_all_to_all_gbit_per_s"] == pytest.approx(
        8 * new["summary"]["inter_node_all_to_all_gbytes_per_s"])


def test_measured_bus_bandwidth_replaces_link_times_efficiency_once():
    """The model's all-reduce time with the probe applied is the probe's own ring time: NET_EFF not applied again
    on measured tiers, still applied on unmeasured ones."""
    cluster = load_cluster_preset("a100-80g")
    measured = NetworkProfile(intra_node_gbytes_per_s=200.0, inter_node_gbytes_per_s=None, latency_s=30e-6)
    new_cluster, constants = apply_network(cluster, DEFAULT, measured)
    assert constants.net_eff == 1.0 and constants.latency_gpu_s == 30e-6
    assert new_cluster.intra_node_gbytes_per_s == 200.0
    assert new_cluster.inter_node_gbytes_per_s == pytest.approx(cluster.inter_node_gbytes_per_s * DEFAULT.net_eff)
    r = st.rates(constants, cpu=False)
    t = st.collective_time_s(1e9, 8, new_cluster.intra_node_gbytes_per_s, "all_reduce", r)
    assert t == pytest.approx(2 * 7 / 8 * 1e9 / 200e9 + 30e-6)
    # unmeasured tier: the same time as before the probe
    before = st.collective_time_s(1e9, 8, cluster.inter_node_gbytes_per_s, "all_reduce", st.rates(DEFAULT, False))
    after = st.collective_time_s(1e9, 8, new_cluster.inter_node_gbytes_per_s, "all_reduce", r)
    assert after - 30e-6 == pytest.approx(before - DEFAULT.latency_gpu_s)
    assert cluster.intra_node_gbytes_per_s == 300        # the preset object itself is left alone


def test_json_round_trip_and_schema(tmp_path):
    result = probe()
    path = save(result, tmp_path / "p.json")
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA and "GB/s" in data["units"]["busbw_gbytes_per_s"]
    assert data["summary"]["intra_node_gbit_per_s"] == pytest.approx(8 * data["summary"]["intra_node_gbytes_per_s"])
    assert load(path) == result
    (tmp_path / "bad.json").write_text(json.dumps({**data, "schema": "other/1"}))
    with pytest.raises(ProbeError):
        load(tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ProbeError):
        load(tmp_path / "broken.json")


def test_cache_is_keyed_by_cluster_and_node_count(tmp_path):
    root = tmp_path / "sweeps"
    save(probe(nodes=2, created_at=10), root / "old" / cache_name("a100-80g", 2))
    save(probe(nodes=2, created_at=20), root / "new" / cache_name("a100-80g", 2))
    save(probe(nodes=4, created_at=30), root / "other" / cache_name("a100-80g", 4))
    (root / "broken").mkdir()
    (root / "broken" / cache_name("a100-80g", 2)).write_text("not json")
    folders = sweep_folders(root, first=root / "this")
    assert folders[0] == root / "this"
    assert find_cached(folders, "a100-80g", 2).created_at == 20
    assert find_cached(folders, "a100-80g", 4).created_at == 30
    assert find_cached(folders, "a100-80g", 8) is None and find_cached(folders, "h100-80g", 2) is None


def test_tables_show_gbytes_and_gbits():
    text = format_tables(probe())
    assert "busbw(GB/s)" in text and "busbw(Gbit/s)" in text and "nccl-tests" in text
    assert "inter-node all_reduce bus bandwidth" in text and "latency" in text


def test_probe_script_runs_one_launcher_per_node():
    script = probe_script(2, 8, "/opt/py bin/python", "/shared/sweep/netbench-x-2n.json", ["--cluster", "x"])
    assert "EXPECTED_NNODES=2" in script and "--nproc-per-node 8" in script
    assert "'/opt/py bin/python' -m torch.distributed.run" in script
    assert "-m launcher.netbench" in script and "--out /shared/sweep/netbench-x-2n.json" in script


def _check_result(path: Path, nodes: int, ranks_per_node: int) -> ProbeResult:
    result = load(path)
    assert (result.nodes, result.ranks_per_node, result.backend) == (nodes, ranks_per_node, "gloo")
    scopes = {"intra_node"} | ({"inter_node"} if nodes > 1 else set())
    for scope in scopes:
        ops = {m.op for m in result.measurements if m.scope == scope}
        assert ops == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv"}, (scope, ops)
    assert all(m.time_s > 0 and m.busbw_gbytes_per_s > 0 for m in result.measurements)
    profile = result.profile()
    assert profile.intra_node_gbytes_per_s > 0 and profile.latency_s > 0
    assert profile.intra_node_all_to_all_gbytes_per_s > 0
    assert (profile.inter_node_gbytes_per_s is not None) == (nodes > 1)
    assert (profile.inter_node_all_to_all_gbytes_per_s is not None) == (nodes > 1)
    return result


ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
SMALL = ["--sizes", "4096,262144", "--iters", "3", "--warmup", "1"]


def test_real_probe_on_this_machine(tmp_path):
    """2 CPU ranks under gloo, started by the module itself (torchrun --standalone)."""
    out = tmp_path / "probe.json"
    proc = subprocess.run([sys.executable, "-m", "launcher.netbench", "--nproc-per-node", "2", "--out", str(out),
                           "--cluster", "local-cpu", *SMALL], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "busbw(Gbit/s)" in proc.stdout and "intra-node all_reduce bus bandwidth" in proc.stdout
    assert "# all_to_all, intra-node, 2 ranks" in proc.stdout and "intra-node all_to_all bus bandwidth" in proc.stdout
    assert _check_result(out, 1, 2).cluster == "local-cpu"


def test_without_torchrun_or_ranks_it_says_how_to_run():
    proc = subprocess.run([sys.executable, "-m", "launcher.netbench"], env={k: v for k, v in ENV.items()
                                                                           if k != "RANK"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "torchrun" in proc.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_emulated_nodes_measure_the_inter_node_tier(tmp_path):
    """Two torchrun agents on this machine joined by one c10d rendezvous, as on two nodes: 2 x 2 ranks."""
    port, out = _free_port(), tmp_path / "probe.json"
    agents = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node",
                                "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id",
                                "netbench-test", "-m", "launcher.netbench", "--out", str(out), *SMALL],
                               cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    try:
        outputs = [a.communicate(timeout=300) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
    assert all(a.returncode == 0 for a in agents), [o[1][-2000:] for o in outputs]
    _check_result(out, 2, 2)


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.timeout(600)
def test_probe_across_the_two_slurm_nodes(slurm_env, tmp_path):
    """The probe job as a sweep would submit it: one task per node under srun, torchrun on each node."""
    out = tmp_path / cache_name("local-cpu", 2)
    (tmp_path / "probe.sh").write_text(probe_script(2, 2, sys.executable, str(out), ["--cluster", "local-cpu",
                                                                                     *SMALL]))
    (tmp_path / "job.sh").write_text(f"#!/bin/bash\nexport PYTHONPATH={REPO} OMP_NUM_THREADS=1\n"
                                     f"srun --ntasks-per-node=1 bash {tmp_path}/probe.sh\n")
    env = {**os.environ, **slurm_env}
    job = subprocess.run(["sbatch", "--parsable", "-p", "debug", "-N2", "--ntasks-per-node=1", "-t", "10", "-o",
                          str(tmp_path / "out.txt"), str(tmp_path / "job.sh")], env=env, capture_output=True,
                         text=True, check=True).stdout.strip().split(";")[0]
    deadline = time.monotonic() + 540
    state = ""
    while time.monotonic() < deadline:
        state = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], env=env, capture_output=True,
                               text=True).stdout.strip()
        if state and state.split()[0] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            break
        time.sleep(2)
    log = (tmp_path / "out.txt").read_text() if (tmp_path / "out.txt").exists() else ""
    assert state.startswith("COMPLETED"), (state, log[-3000:])
    result = _check_result(out, 2, 2)
    assert set(result.hosts) == {"n1", "n2"}
    assert "inter-node all_reduce bus bandwidth" in log


def test_measured_all_to_all_reaches_the_cluster_for_moe_dispatch():
    cluster = load_cluster_preset("a100-80g")
    measured = NetworkProfile(intra_node_gbytes_per_s=200.0, inter_node_gbytes_per_s=20.0, latency_s=None,
                              intra_node_all_to_all_gbytes_per_s=150.0, inter_node_all_to_all_gbytes_per_s=None)
    new_cluster, _ = apply_network(cluster, DEFAULT, measured)
    assert new_cluster.intra_node_all_to_all_gbytes_per_s == 150.0
    assert new_cluster.inter_node_all_to_all_gbytes_per_s == 0.0     # not measured: the tier's bandwidth prices it
