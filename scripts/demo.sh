#!/usr/bin/env bash
# Sets everything up, then remembers some knowledge in the default database
# (~/.lore/memory.db, or $LORE_DB_PATH) and recalls it, printing the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
lore=.venv/bin/lore
$lore remember --topic "Lore demo" "Lore keeps its memory in one SQLite file in WAL mode, so readers never wait for writers."
$lore remember --topic "Lore demo" "Hooks never block Claude Code: slow work runs in a detached worker process."
$lore recall "where does the memory live and who waits for whom" --tree
