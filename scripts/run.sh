#!/usr/bin/env bash
# Set up a fresh machine and run aiayn's main job end to end (the README's first command):
# Multi30k En→De, Transformer-Tiny on raw cased text, trained on the CPU, averaged, decoded,
# scored with standard sacreBLEU and the literature's tokenised lowercased BLEU.
# Everything installs into .venv (see scripts/venv.sh); arguments go to `aiayn pipeline`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh ""
aiayn pipeline configs/multi30k_en_de_tiny_raw.toml "$@"
