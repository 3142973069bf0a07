#!/bin/sh
# Installs what the test suite needs on a fresh Debian-like machine:
# reticle itself (editable), the test tools, and Debian's chromium.
set -eu
python3 -m pip install --quiet -e . -r tests/requirements.txt
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    fi
fi
# React's UMD builds for the real-React test (npm registry; kept out of git in tests/.js/).
if command -v npm >/dev/null 2>&1 && [ ! -f tests/.js/node_modules/react-dom/umd/react-dom.development.js ]; then
    npm install --prefix tests/.js --no-audit --no-fund --silent react@18.3.1 react-dom@18.3.1 >/dev/null
fi
# ESLint for `python3 tools/sdk.py lint` (the embedded SDK), into the same kept-out-of-git folder.
if command -v npm >/dev/null 2>&1 && [ ! -f tests/.js/node_modules/globals/package.json ]; then
    npm install --prefix tests/.js --no-audit --no-fund --silent eslint@10.15.0 globals@17.14.0 >/dev/null
fi
