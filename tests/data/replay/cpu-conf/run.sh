#!/usr/bin/env bash
# Run one replay grid through parasweep's own sweep loop and record when it ran and the machine's load then.
# usage: bash tests/data/replay/cpu-conf/run.sh SWEEP_FILE_NAME [SWEEP_NAME] [extra Hydra overrides...]
# Writes sweeps/<name>.meta (start date, load average at the start, wall seconds, commit) and sweeps/<name>.load
# (epoch seconds and the 1-minute load average every 5 s while the sweep runs: the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
grid=$1; shift
name=${1:-$grid}; [ $# -gt 0 ] && shift
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
( while true; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; sleep 5; done ) > "sweeps/$name.load" &
sampler=$!
rc=0
.venv/bin/python -m launcher --config-dir tests/data/replay/cpu-conf +sweep="$grid" sweep.name="$name" "$@" \
    > "sweeps/$name.log" 2>&1 || rc=$?
kill "$sampler"
t1=$(date +%s)
printf 'start=%s\nload=%s\nwall_s=%s\ncommit=%s\nrc=%s\nargs=%s\n' "$start" "$load" "$((t1 - t0))" \
    "$(git rev-parse --short HEAD)" "$rc" "$*" > "sweeps/$name.meta"
cat "sweeps/$name.meta"
tail -25 "sweeps/$name.log"
