#!/usr/bin/env bash
# Trains (or, with --resume, continues) the `default` model. Run from anywhere; needs ../shared/data.
# Extra arguments go to `shazip train` (e.g. --resume, --minutes 60).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD
D=../shared/data
mkdir -p runs/data
if [ ! -f runs/data/xml-valid.xml ]; then  # hold out the tail of the XML dump for validation
  python - <<'PY'
import zstandard
d = zstandard.ZstdDecompressor().decompress(open("../shared/data/wiki-xml.xml.zst", "rb").read(), max_output_size=10**8)
cut = d.find(b"\n", len(d) - 500_000) + 1
open("runs/data/xml-train.xml", "wb").write(d[:cut])
open("runs/data/xml-valid.xml", "wb").write(d[cut:])
PY
fi
X=runs/data/xml-train.xml
exec python -m shazip.train $D/wiki-text-a.txt.zst $X $X $X $D/wiki-text-b.txt.zst $X $X $X runs/data/xml-valid.xml \
  --config small --out runs/A --name default --batch 64 --bptt 128 --lr 2e-3 --warmup 200 \
  --valid-bytes 499609 --eval-every 1000 --log-every 50 --checkpoint-minutes 5 --threads 1 -q "$@"
