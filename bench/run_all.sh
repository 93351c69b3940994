#!/usr/bin/env bash
# Runs every benchmark, printing its table and writing JSON under bench/results/.
# Needs the setup from scripts/setup.sh. The first run builds cached databases under
# bench/.cache (100K fragments, LoCoMo embeddings): allow ~15 minutes; later runs are faster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
py=.venv/bin/python
mkdir -p bench/results
$py bench/bench_hooks.py --json bench/results/hooks.json
$py bench/bench_memory.py --json bench/results/memory.json
$py bench/bench_model.py --json bench/results/model.json
$py bench/bench_server.py --json bench/results/server.json
$py bench/bench_ingest.py --json bench/results/ingest.json
$py bench/bench_tokens.py --json bench/results/tokens.json
$py bench/bench_consolidate.py --json bench/results/consolidate.json
$py bench/bench_recall.py --json bench/results/recall.json "$@"
$py bench/bench_prompt_recall.py --json bench/results/prompt_recall.json
$py bench/bench_viewer.py --json bench/results/viewer.json
