#!/usr/bin/env bash
# Set up a fresh machine and run the test suite (the README's test command).
# Everything installs into .venv (see scripts/venv.sh); arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Chromium (apt) installs beside .venv (pip): neither waits for the other
bash scripts/install_chromium.sh &
chromium=$!
source scripts/venv.sh dev
wait "$chromium" || true  # the page test skips, saying why, without it
# In parallel, one worker per logical CPU (tests sharing a module's fixture stay on one worker:
# --dist loadgroup, groups set in tests/conftest.py, which hands out the slow ones first); the
# 15 slowest are listed.
python -m pytest -q -n logical --dist loadgroup --durations=15 "$@"
