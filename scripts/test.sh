#!/usr/bin/env bash
# Sets everything up (idempotent) and runs the whole test suite, lint and type check included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check lore_plugin tests bench
.venv/bin/mypy lore_plugin
.venv/bin/python -m pytest -q "$@"
