#!/usr/bin/env bash
# Export one finished grid as tests/data/replay/cpu_<name>.csv with its SOURCE header.
# usage: bash tests/data/replay/cpu-conf/export.sh NAME "RANKS_AND_EXECUTOR" "WHAT VARIES"
# e.g.   bash tests/data/replay/cpu-conf/export.sh tiny-r4 "4 CPU ranks (local executor)" "tp x pp split, mbs"
set -euo pipefail
cd "$(dirname "$0")/../../../.."
name=$1 ranks=$2 varies=$3
meta=sweeps/$name.meta
start=$(sed -n 's/^start=//p' "$meta") load=$(sed -n 's/^load=//p' "$meta")
wall=$(sed -n 's/^wall_s=//p' "$meta") commit=$(sed -n 's/^commit=//p' "$meta")
out=tests/data/replay/cpu_${name//-/_}.csv
during=""
if [ -s "sweeps/$name.load" ]; then  # 1-minute load average sampled every 5 s while the sweep ran
  during=$(sort -n -k2 "sweeps/$name.load" | awk '{v[NR]=$2} END {printf "; 1-min load during the sweep: median %s, range %s-%s", v[int((NR+1)/2)], v[1], v[NR]}')
fi
body=$(.venv/bin/python -m launcher.measured "sweeps/$name")
{
  echo "# SOURCE: parasweep's own $name sweep on this project's 2-core CPU machine ($start, commit $commit), $ranks,"
  echo "# gloo, fp32, 2 warm-up + 4 measured iterations, one trial at a time; load average at the sweep's start $load$during"
  echo "# (the machine was shared with other jobs); sweep wall time ${wall} s. Command: python -m launcher --config-dir"
  echo "# tests/data/replay/cpu-conf +sweep=<grid> sweep.name=$name (tests/data/replay/cpu-conf/sweep/), then"
  echo "# python -m launcher.measured sweeps/$name. oom rows are real CPU-allocator OOMs under the workload's per-rank cap."
  echo "# SOURCE_ID: parasweep-cpu"
  echo "# VARIES: $varies"
  echo "$body" | sed 's/^# SOURCE: python -m launcher.measured/# Exported by: python -m launcher.measured/'
} > "$out"
echo "wrote $out: $(grep -c ',ok,' "$out") ok, $(grep -c ',oom,' "$out") oom"
.venv/bin/python -m launcher.replay "$out" --strategy adaptive --startup-s 10 --warmup-iters 2 --measure-iters 4
