# Create the virtual environment .venv in the repository root (once), install PyTorch and then
# aiayn into it. Works where pip refuses to install into the system's Python (PEP 668: Debian
# 12+, Ubuntu 23.04+, Homebrew).
#   bash scripts/venv.sh [EXTRA]     # install only: EXTRA "serve" for the server, "dev" for
#                                    # the tests and docs; then: source .venv/bin/activate
#   source scripts/venv.sh EXTRA     # run.sh and test.sh: install, and activate it
# Afterwards, in a shell of your own: source .venv/bin/activate
venv_python="${AIAYN_PYTHON:-python3}"
if ! "$venv_python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "aiayn needs Python 3.10 or newer as $venv_python (set AIAYN_PYTHON=/path/to/python3.X)" >&2
    exit 2
fi
if [ ! -x .venv/bin/python ]; then
    if ! "$venv_python" -m venv .venv; then
        rm -rf .venv
        echo "could not create .venv: on Debian or Ubuntu, apt install python3-venv, then run this again" >&2
        exit 2
    fi
fi
# shellcheck disable=SC1091
source .venv/bin/activate
# pip byte-compiles what it installs on one core; compileall does it on every core (a file
# that is no Python it cannot compile, as pip cannot: both go on)
# PyTorch: on a machine without an NVIDIA GPU, the CPU build from PyTorch's own index (about
# 200 MB; the default index's Linux build carries CUDA, several GB), falling back to the
# default index where PyTorch's cannot be reached. AIAYN_TORCH_INDEX=URL picks an index.
torch_index="${AIAYN_TORCH_INDEX:-}"
if [ -z "$torch_index" ] && ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; } \
    && python -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=5)' \
        https://download.pytorch.org/whl/cpu/torch/ >/dev/null 2>&1; then
    torch_index=https://download.pytorch.org/whl/cpu
fi
python -m pip install --quiet --no-compile ${torch_index:+--extra-index-url "$torch_index"} torch==2.13.0
python -m pip install --quiet --no-compile -e ".${1:+[$1]}"
python -m compileall -qq -j 0 .venv/lib || true
# run as a command (the install-only one): say what is installed and how to use it
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    python -c "import importlib.metadata as m, torch; print('installed in .venv: aiayn', m.version('aiayn') + ', PyTorch', torch.__version__)"
    echo "use it in your shell: source .venv/bin/activate"
fi
