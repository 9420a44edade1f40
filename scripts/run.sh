#!/usr/bin/env bash
# Set up a fresh machine and run aiayn's main job end to end (the README's first command):
# Multi30k En→De, Transformer-Tiny on raw cased text, trained on the CPU, averaged, decoded,
# scored with standard sacreBLEU and the literature's tokenised lowercased BLEU.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet torch==2.13.0
python3 -m pip install --quiet -e .
aiayn pipeline configs/multi30k_en_de_tiny_raw.toml "$@"
