#!/usr/bin/env bash
# Trains `large` on a lent GPU machine for one command's time, from the repository root, with the
# folder models/gpu/prepare.py made here carried along:
#
#   device run: carry ["train-run"], timeout_s 600, command "bash models/gpu/train.sh"
#
# Nothing is installed: the trainer runs from the tree with the machine's torch (no native core,
# no zstandard: the texts travel as xz). Phases, each under its own limit, each logged: the machine,
# the texts unpacked and checked, then `shazip train` on CUDA (bf16 autocast) for
# SHAZIP_TRAIN_MINUTES (default 7.5), its last fifth a linear cooldown of the learning rate (the
# next lend warms it up again), from train-run/init.safetensors where the pack has one. It
# ends in a checkpoint and a float export (15 MB), which the next lend's pack takes as --init.
# Into $OUT, at most the 8 files a device run returns: train.log (ending in a summary line),
# metrics.jsonl, large.safetensors, and the checkpoint (checkpoint.json and its pieces of at most
# 16 MB) where it fits in the rest: the carried attention memory makes it ~200 MB at batch 256,
# so a lend normally continues from the export, with a fresh optimizer.
# A dry run here (a CPU evaluates all the held-out text too slowly: judge on its last 20 KB):
#   SHAZIP_TRAIN_DEVICE=cpu SHAZIP_TRAIN_MINUTES=0.2 SHAZIP_TRAIN_BATCH=8 SHAZIP_TRAIN_VALID_BYTES=20000 \
#   bash models/gpu/train.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/shazip-train-out}
RUN=${SHAZIP_TRAIN_RUN:-train-run}
MINUTES=${SHAZIP_TRAIN_MINUTES:-7.5}
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

# The run's steps, from the minutes at the rate a lend has shown (an H200: 29 steps/s with its
# evaluations, 27 here for a margin), so that its last fifth can cool the learning rate down
# (--cooldown needs --steps; --minutes still stops a slower machine, mid-cooldown).
STEPS=$(python -c "print(int(60 * $MINUTES * ${SHAZIP_TRAIN_STEPS_PER_S:-27}))")
INIT=""
[ -f "$RUN/init.safetensors" ] && INIT="--init $RUN/init.safetensors"
phase machine 30 "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; cat $RUN/manifest.json; \
  python -c 'import torch; print(torch.__version__, torch.cuda.is_available())'"
phase unpack 60 "python models/gpu/prepare.py --out $RUN --unpack $TEXT" \
  && phase train $(python -c "print(int(60 * $MINUTES) + 90)") \
    "python -m shazip.train $TEXT/train.txt $TEXT/valid.txt --config large $INIT --out $RUNDIR --name large \
     --device ${SHAZIP_TRAIN_DEVICE:-cuda} --minutes $MINUTES --steps $STEPS --cooldown $((STEPS / 5)) --batch ${SHAZIP_TRAIN_BATCH:-256} --bptt 128 --lr 2e-3 --warmup 300 \
     --valid-bytes ${SHAZIP_TRAIN_VALID_BYTES:-\$(stat -c %s $TEXT/valid.txt)} --eval-every 2000 --log-every 100 --checkpoint-minutes 2"
status=$?
cp "$RUNDIR"/metrics.jsonl "$RUNDIR"/large.safetensors "$OUT"/ 2>> "$LOG"
if [ "$(ls "$RUNDIR"/checkpoint* 2>/dev/null | wc -l)" -le 5 ]; then
  cp "$RUNDIR"/checkpoint* "$OUT"/ 2>> "$LOG"
else
  echo "checkpoint: $(du -sm "$RUNDIR" | cut -f1) MB in $(ls "$RUNDIR"/checkpoint* | wc -l) files, more than come back: left" >> "$LOG"
fi
tail -n 3 "$RUNDIR/metrics.jsonl" >> "$LOG" 2>/dev/null
echo "summary: $SUMMARY" >> "$LOG"
rm -rf "$TEXT" "$(dirname "$RUNDIR")"
exit $status
