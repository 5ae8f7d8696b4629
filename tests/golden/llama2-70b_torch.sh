#!/usr/bin/env bash
# parasweep trial: llama2-70b on the embedded workload; layout tp8 pp4 dp2 vpp2 mbs1 gbs1024 rc=selective sp distopt 8n
# trial folder: /scratch/sweeps/70b/t0001
# Runs once per node.
set -euo pipefail

# Where this node sits in the job. Under SLURM the script runs as one task per node (srun --ntasks-per-node=1).
EXPECTED_NNODES=8
# SUBMITIT_EXECUTOR=local: a local trial started from inside an allocation must not take its SLURM_* variables.
if [[ -n "${SLURM_JOB_NODELIST:-}" && "${SUBMITIT_EXECUTOR:-}" != local ]]; then
  UNDER_SLURM=1
  # sed (not head) reads all of scontrol's output, so pipefail never sees a SIGPIPE.
  MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"
  NODE_RANK="${SLURM_PROCID:?run one task per node under srun (SLURM_PROCID is unset)}"
  NNODES="${SLURM_NNODES:?SLURM_NNODES is unset}"
  JOB_ID="${SLURM_JOB_ID:?SLURM_JOB_ID is unset}"
  # Same port on every node of the job, 20000-39999, unless set.
  MASTER_PORT="${MASTER_PORT:-$(( 20000 + JOB_ID % 20000 ))}"
else
  UNDER_SLURM=0
  MASTER_ADDR=127.0.0.1
  NODE_RANK=0
  NNODES=1
fi
if [[ "$NNODES" -ne "$EXPECTED_NNODES" ]]; then
  echo "parasweep: this trial needs $EXPECTED_NNODES node(s) but runs on $NNODES" >&2
  exit 2
fi
export MASTER_ADDR NODE_RANK NNODES

# Per-node launcher: torchrun. Under SLURM all nodes join one c10d rendezvous on the first node; alone,
# --standalone lets torchrun pick a free port, so concurrent local trials never collide.
LAUNCHER=(python -m torch.distributed.run --nproc-per-node 8)
if [[ "$UNDER_SLURM" == 1 ]]; then
  LAUNCHER+=(--nnodes "$NNODES" --node-rank "$NODE_RANK" --rdzv-backend c10d \
    --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "$JOB_ID")
else
  LAUNCHER+=(--standalone --nnodes 1)
fi

exec "${LAUNCHER[@]}" \
  -m launcher.workload \
  --layers 80 \
  --hidden 8192 \
  --heads 64 \
  --kv-heads 8 \
  --ffn-hidden 28672 \
  --swiglu \
  --seq-len 4096 \
  --vocab 32000 \
  --norm rmsnorm \
  --untie-embeddings \
  --tp 8 \
  --pp 4 \
  --dp 2 \
  --vpp 2 \
  --mbs 1 \
  --gbs 1024 \
  --recompute selective \
  --sequence-parallel \
  --zero-stage 0 \
  --distributed-optimizer \
  --precision bf16 \
  --warmup-iters 5 \
  --measure-iters 10 \
  --seed 1234 \
  --mem-limit-mb 0 \
  --peak-tflops 312
