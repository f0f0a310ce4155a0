cd "$(dirname "$0")/.."
export PYTHONPATH="$(dirname "$0")/.."
exec python -m shazip.train ../shared/data/wiki-text-a.txt.zst runs/data/xml-train.xml runs/data/xml-train.xml runs/data/xml-train.xml ../shared/data/wiki-text-b.txt.zst runs/data/xml-train.xml runs/data/xml-train.xml runs/data/xml-train.xml runs/data/xml-valid.xml \
  --config small --out runs/A --name default --batch 64 --bptt 128 --lr 2e-3 --warmup 200 \
  --valid-bytes 499609 --eval-every 1000 --log-every 50 --checkpoint-minutes 5 --threads 1 -q "$@"
