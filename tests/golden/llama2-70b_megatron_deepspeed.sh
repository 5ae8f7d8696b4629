#!/usr/bin/env bash
# parasweep trial: llama2-70b on Megatron-DeepSpeed; layout tp8 pp4 dp2 mbs1 gbs1024 rc=selective sp zero1 8n
# trial folder: /scratch/sweeps/70b/trials/t0002
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

# Remove a stale fused-kernel build lock (a killed build's lock hangs every later run at "compiling and loading
# fused kernels"); a lock younger than 5 min may be another trial's live build and is kept.
MEGATRON_PATH=/shared/Megatron-DeepSpeed
FUSED_KERNEL_LOCK="$MEGATRON_PATH/megatron/fused_kernels/build/lock"
if [[ -n "$(find "$FUSED_KERNEL_LOCK" -maxdepth 0 -mmin +5 2>/dev/null)" ]]; then
  rm -f "$MEGATRON_PATH/megatron/fused_kernels/build/lock"
fi

export CUDA_DEVICE_MAX_CONNECTIONS=1

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
  /shared/Megatron-DeepSpeed/pretrain_gpt.py \
  --num-layers 80 \
  --hidden-size 8192 \
  --num-attention-heads 64 \
  --ffn-hidden-size 28672 \
  --seq-length 4096 \
  --max-position-embeddings 4096 \
  --swiglu \
  --untie-embeddings-and-output-weights \
  --disable-bias-linear \
  --num-key-value-heads 8 \
  --normalization rmsnorm \
  --use-rotary-position-embeddings \
  --no-position-embedding \
  --tensor-model-parallel-size 8 \
  --pipeline-model-parallel-size 4 \
  --micro-batch-size 1 \
  --global-batch-size 1024 \
  --sequence-parallel \
  --recompute-granularity selective \
  --bf16 \
  --use-flash-attn-v2 \
  --train-iters 15 \
  --exit-interval 15 \
  --log-interval 1 \
  --eval-iters 0 \
  --eval-interval 1000000 \
  --lr 0.0001 \
  --seed 1234 \
  --distributed-backend nccl \
  --data-path /datasets/llama2/tokens_text_document \
  --tokenizer-type GPTSentencePieceTokenizer \
  --tokenizer-model /datasets/llama2/tokenizer.model \
  --deepspeed \
  --deepspeed_config /scratch/sweeps/70b/trials/t0002/ds_config.json \
  --zero-stage 1
