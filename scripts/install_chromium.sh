#!/usr/bin/env bash
# Install Debian's chromium for the web page's browser test (tests/serve/test_page.py), when
# it is missing and apt can install it. Says why when it cannot; never fails the caller.
set -uo pipefail
for name in chromium chromium-browser; do
    command -v "$name" >/dev/null && exit 0
done
if ! command -v apt-get >/dev/null; then
    echo "install_chromium: no apt-get here; the browser test will be skipped" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo="sudo -n"; else
        echo "install_chromium: not root and no sudo; the browser test will be skipped" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1; then
    $sudo apt-get update -qq >/dev/null 2>&1
    if ! $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; then
        echo "install_chromium: apt-get could not install chromium; the browser test will be skipped" >&2
        exit 1
    fi
fi
