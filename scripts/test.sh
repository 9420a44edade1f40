#!/usr/bin/env bash
# Set up a fresh machine and run the test suite (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet torch==2.13.0
python3 -m pip install --quiet -e ".[dev]"
bash scripts/install_chromium.sh || true  # the page test skips, saying why, without it
python3 -m pytest -q "$@"
