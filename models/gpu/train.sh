#!/usr/bin/env bash
# Trains `large` on a lent GPU machine for one command's time, from the repository root, with the
# folder models/gpu/prepare.py made here carried along:
#
#   device run: carry ["train-run"], timeout_s 600, command "bash models/gpu/train.sh"
#
# Nothing is installed: the trainer runs from the tree with the machine's torch (no native core,
# no zstandard: the texts travel as xz). Phases, each under its own limit, each logged: the machine;
# the texts unpacked and checked; the sweep (models/gpu/sweep.py, SHAZIP_TRAIN_SWEEP_S seconds):
# the fastest batch x bptt on this card among those the batch study admits (batches up to
# SHAZIP_TRAIN_MAX_BATCH); then `shazip train` on CUDA (bf16 autocast, the texts resident on the
# card) with that setting for SHAZIP_TRAIN_MINUTES (default 6.5), its rate and warm-up scaled from
# batch 256's (--ref-batch), its last fifth a linear cooldown, from train-run/init.safetensors
# (the newest milestone) where the pack has one. No checkpoint (it would not come back): every
# minute the float export and the metrics are written straight into $OUT, so a run cut short by
# the device's limit still returns its last weights.
# Into $OUT: train.log (ending in a summary line), sweep.json, metrics.jsonl, large.safetensors
# (float32, 15 MB). Land them here with `python models/gpu/land.py FILES_AT --device-seconds WALL_S`.
# A dry run here (a CPU evaluates all the held-out text too slowly: judge on its first 20 KB):
#   SHAZIP_TRAIN_DEVICE=cpu SHAZIP_TRAIN_MINUTES=0.2 SHAZIP_TRAIN_SWEEP_S=20 SHAZIP_TRAIN_BATCHES="8 16" \
#   SHAZIP_TRAIN_MAX_BATCH=16 SHAZIP_TRAIN_EVAL_BYTES=20000 bash models/gpu/train.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/shazip-train-out}
RUN=${SHAZIP_TRAIN_RUN:-train-run}
MINUTES=${SHAZIP_TRAIN_MINUTES:-6.5}
DEVICE=${SHAZIP_TRAIN_DEVICE:-cuda}
TEXT=$(mktemp -d)
RUNDIR=$(mktemp -d)/run
mkdir -p "$OUT"
LOG="$OUT/train.log"
: > "$LOG"
SUMMARY=""

phase() {  # phase NAME LIMIT COMMAND...: runs COMMAND under LIMIT seconds, output to the log
  local name=$1 limit=$2 start=$SECONDS status
  shift 2
  echo "== $name (limit ${limit}s)" >> "$LOG"
  timeout --signal=INT --kill-after=30 "$limit" bash -c "$*" >> "$LOG" 2>&1
  status=$?
  echo "== $name: exit $status in $((SECONDS - start))s" >> "$LOG"
  SUMMARY+="$name=$status:$((SECONDS - start)) "
  return $status
}

INIT=""
[ -f "$RUN/init.safetensors" ] && INIT="--init $RUN/init.safetensors"
phase machine 30 "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; cat $RUN/manifest.json; \
  python -c 'import torch; print(torch.__version__, torch.cuda.is_available())'"
phase unpack 60 "python models/gpu/prepare.py --out $RUN --unpack $TEXT" || { echo "summary: $SUMMARY" >> "$LOG"; exit 1; }
# The sweep's answer, one line "BATCH BPTT COMPILE STEPS_PER_S"; batch 256 x 128 at the last lends' rate without one.
phase sweep $(( ${SHAZIP_TRAIN_SWEEP_S:-60} + 60 )) "python models/gpu/sweep.py $TEXT/train.txt $TEXT/valid.txt $INIT \
  --config ${SHAZIP_TRAIN_CONFIG:-large} --seconds ${SHAZIP_TRAIN_SWEEP_S:-60} --batches ${SHAZIP_TRAIN_BATCHES:-256 1024 4096} \
  --max-batch ${SHAZIP_TRAIN_MAX_BATCH:-4096} ${SHAZIP_TRAIN_COMPILE:+--compile} --device $DEVICE --out $OUT > $TEXT/choice"
read -r BATCH BPTT COMPILE RATE < <(tail -n 1 "$TEXT/choice" 2>/dev/null; echo)
[ -n "${RATE:-}" ] || { BATCH=256; BPTT=128; COMPILE=0; RATE=27; }
# --steps from the sweep's rate, so that the last fifth cools the rate down (--minutes stops a slower run mid-cooldown)
STEPS=$(python -c "print(max(10, int(0.95 * 60 * $MINUTES * $RATE)))")
echo "training at batch $BATCH x bptt $BPTT, compile $COMPILE, $RATE steps/s: $STEPS steps" >> "$LOG"
phase train $(python -c "print(int(60 * $MINUTES) + 90)") \
  "python -m shazip.train $TEXT/train.txt $TEXT/valid.txt --config ${SHAZIP_TRAIN_CONFIG:-large} $INIT \
   --out $RUNDIR --name large --valid-bytes \$(stat -c %s $TEXT/valid.txt) --device $DEVICE --minutes $MINUTES --steps $STEPS --cooldown $((STEPS / 5)) --batch $BATCH --bptt $BPTT \
   --ref-batch 256 --lr 2e-3 --warmup 300 $([ "$COMPILE" = 1 ] && echo --compile) --no-checkpoint \
   --snapshot $OUT --checkpoint-minutes 1 --eval-every 1000000000 --eval-minutes 2 \
   --eval-bytes ${SHAZIP_TRAIN_EVAL_BYTES:-262144} --log-every 50"
status=$?
tail -n 3 "$OUT/metrics.jsonl" >> "$LOG" 2>/dev/null
echo "summary: $SUMMARY" >> "$LOG"
rm -rf "$TEXT" "$(dirname "$RUNDIR")"
exit $status
