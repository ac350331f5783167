#!/usr/bin/env bash
# bench/fidelity_rank.py on a lent GPU machine, from the repository root, in one command:
# the wheels its python lacks from .dev/whl, a one-configuration smoke at tiny size, the real
# bench under a wall cap, the summary of whatever finished into $OUT, and the per-run records.
#   bash bench/fidelity_device.sh [CONFIGS] [JOBS] [WALL_SECONDS]
# .dev (not committed): whl/ (pydantic & co, cp312 manylinux), data/ (the calibrated realistic
# sample, 1,484 posts), tiny/ (60 posts), minilm/ (all-MiniLM-L6-v2 stored in float16).
set -uo pipefail
CONFIGS=${1:-30} JOBS=${2:-8} WALL=${3:-420}
OUT=${OUT:-/tmp/fidelity-out} LENGTH=${LENGTH:-256}  # LENGTH: a CPU test of this script
# RUNS_DIR: where the per-run records go; a folder a cut-short call returned goes on from them
RUNS_DIR=${RUNS_DIR:-/tmp/fr-runs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "${WHEELS:-.dev/whl}"/*.whl ||  # a venv without pip: a wheel is a zip of site-packages
  python3 -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('/tmp/site') for w in glob.glob('${WHEELS:-.dev/whl}/*.whl')]" ||
  exit 3
rm -rf /tmp/site/tests /tmp/site/benchmarks /tmp/site/examples  # no shadowing of the repo
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
start=$(date +%s)
python3 -m bench.fidelity_rank --data .dev/tiny --encoder .dev/minilm --configs 1 --length "$LENGTH" \
  --max-epochs 2 --jobs "$JOBS" --runs /tmp/fr-smoke --out "$OUT/smoke.json" >"$OUT/smoke.log" 2>&1
smoke=$?
tail -n 15 "$OUT/smoke.log"
if [ $smoke -ne 0 ] || [ "$(ls /tmp/fr-smoke/c*.json 2>/dev/null | wc -l)" -lt 10 ]; then
  echo "SMOKE FAILED ($smoke), after $(( $(date +%s) - start )) s"
  for f in /tmp/fr-smoke/*.log; do echo "== $f"; tail -n 25 "$f"; done
  tar czf "$OUT/fidelity_smoke_runs.tgz" -C /tmp fr-smoke 2>/dev/null
  exit 4
fi
echo "smoke ok in $(( $(date +%s) - start )) s"
timeout -k 20 "$WALL" python3 -m bench.fidelity_rank --data .dev/data --encoder .dev/minilm \
  --configs "$CONFIGS" --jobs "$JOBS" --length "$LENGTH" --runs "$RUNS_DIR" >"$OUT/bench.log" 2>&1
echo "bench exit $? after $(( $(date +%s) - start )) s; $(ls "$RUNS_DIR"/c*.json 2>/dev/null | wc -l) runs"
tail -n 5 "$OUT/bench.log"
python3 -m bench.fidelity_rank --summary --runs "$RUNS_DIR" --out "$OUT/fidelity_rank.json" \
  --machine-use "a lent GPU machine ($(nvidia-smi --query-gpu=name --format=csv,noheader \
  | head -1)), nothing else on it; $JOBS runs at a time shared its one GPU" >"$OUT/summary.log" 2>&1 || { echo "SUMMARY FAILED"; tail -n 30 "$OUT/summary.log"; }
tar czf "$OUT/fidelity_runs.tgz" -C "$(dirname "$RUNS_DIR")" "$(basename "$RUNS_DIR")"
python3 - "$OUT/fidelity_rank.json" <<'EOF' || true
import json, sys
r = json.load(open(sys.argv[1]))
for case, (run,) in r["runs"].items():
    print(case, {k: v for k, v in run.items()})
print(r["workload"]["finished"])
EOF
echo "done after $(( $(date +%s) - start )) s"
