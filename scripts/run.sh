#!/usr/bin/env bash
# Set up a fresh machine and run aiayn's main job end to end (the README's first command).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet torch==2.13.0
python3 -m pip install --quiet -e .
python3 examples/copy_task.py
