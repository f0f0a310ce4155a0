#!/usr/bin/env bash
# The GPU device run: on a bare device machine (torch with CUDA there, no network), from the
# repository root, with the folder benchmarks/gpu/prepare.py made here carried along:
#
#   device run: carry ["gpu-run"], timeout_s 600, command "bash benchmarks/gpu/run.sh"
#
# Phases, each under its own time limit (all of them under a device command's 600 s), each
# logged: install the project with the machine's torch (no build isolation, no network; the core
# built on every core, pybind11 from the carried wheel where the machine's is older than 2.12),
# every CUDA test (in 4 processes where pytest-xdist is there: alone they took 158 s of an H200
# lend), where the step's time goes (breakdown.py: $OUT/breakdown.json), then the benchmark.
# Writes $OUT/summary.json (each phase's status and seconds, the machine, the benchmark's rows)
# and $OUT/run.log. Exits 0 only where every phase passed.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/shazip-gpu-out}
RUN=${SHAZIP_GPU_RUN:-gpu-run}
mkdir -p "$OUT"
LOG="$OUT/run.log"
: > "$LOG"
declare -A STATUS SECONDS_OF

phase() {  # phase NAME LIMIT COMMAND...: runs COMMAND under LIMIT seconds, output to the log
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  echo "== $name (limit ${limit}s)" >> "$LOG"
  timeout --kill-after=10 "$limit" bash -c "$*" >> "$LOG" 2>&1
  STATUS[$name]=$?
  SECONDS_OF[$name]=$((SECONDS - start))
  echo "== $name: exit ${STATUS[$name]} in ${SECONDS_OF[$name]}s" >> "$LOG"
}

phase machine 30 "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; python -c 'import torch, pybind11; print(torch.__version__, torch.cuda.is_available(), pybind11.__version__)'"
phase install 240 "python -c 'import pybind11, sys; sys.exit(tuple(map(int, pybind11.__version__.split(\".\")[:2])) < (2, 12))' \
  || python -m pip install -q --no-index --find-links $RUN/wheels 'pybind11>=2.12'; \
  SHAZIP_BUILD_JOBS=\$(nproc) python -m pip install -q --no-build-isolation --no-deps --no-index -e . && python -c 'import shazip.core as c; c.load(); print(c.kernels())'"
phase tests 300 "SHAZIP_GPU_RUN=$RUN python -m pytest -q -p no:cacheprovider \$(python -c 'import xdist' 2>/dev/null && echo --numprocesses=4) tests/test_gpu.py tests/test_devices.py tests/test_quant.py tests/test_lane_batch.py -rs --durations=12"
phase breakdown 150 "python benchmarks/gpu/breakdown.py --input $RUN/mixed.txt.xz --out $OUT/breakdown.json"
# the bench gets what is left of 570 s (a device command may run 600 s; the summary must be written)
phase bench $(( 570 - SECONDS > 60 ? 570 - SECONDS : 60 )) "python benchmarks/gpu/bench.py --input $RUN/mixed.txt.xz --mib \${SHAZIP_GPU_MIB:-8} --out $OUT/bench.json"

PHASES=""
for name in machine install tests breakdown bench; do PHASES+="$name=${STATUS[$name]}:${SECONDS_OF[$name]} "; done
export PHASES
python - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
phases = {k: {"exit": int(v.split(":")[0]), "seconds": int(v.split(":")[1])} for k, v in
          (p.split("=", 1) for p in os.environ["PHASES"].split())}
bench = json.load(open(f"{out}/bench.json")) if os.path.exists(f"{out}/bench.json") else None
breakdown = json.load(open(f"{out}/breakdown.json")) if os.path.exists(f"{out}/breakdown.json") else None
summary = {"phases": phases, "passed": all(p["exit"] == 0 for p in phases.values()), "breakdown": breakdown,
           "bench": bench}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(summary))
sys.exit(0 if summary["passed"] else 1)
PY
