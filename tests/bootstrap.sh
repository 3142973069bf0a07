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
# ESLint for `python3 tools/sdk.py lint` (the in-page scripts of src/sdk/), into the same kept-out-of-git folder.
if command -v npm >/dev/null 2>&1 && [ ! -f tests/.js/node_modules/globals/package.json ]; then
    npm install --prefix tests/.js --no-audit --no-fund --silent eslint@10.15.0 globals@17.14.0 >/dev/null
fi
# Hotwire Turbo 8 (Turbo Drive form posts that follow their 303 in a fetch) for tests/test_horizon.py.
if command -v npm >/dev/null 2>&1 && [ ! -f tests/.js/node_modules/@hotwired/turbo/dist/turbo.es2017-umd.js ]; then
    npm install --prefix tests/.js --no-audit --no-fund --silent @hotwired/turbo@8.0.23 >/dev/null
fi
# Real Express and Next.js apps with stock OpenTelemetry instrumentation for tests/test_otel.py (releases that run
# on Node 20), into its own kept-out-of-git folder; and Debian's PostgreSQL for its traced database.
if command -v npm >/dev/null 2>&1 && [ ! -f tests/.otel/node_modules/next/package.json ]; then
    npm install --prefix tests/.otel --no-audit --no-fund --silent express@4.21.2 pg@8.13.1 @opentelemetry/api@1.9.0 \
        @opentelemetry/sdk-node@0.57.2 @opentelemetry/instrumentation-http@0.57.2 \
        @opentelemetry/instrumentation-express@0.47.1 @opentelemetry/instrumentation-pg@0.51.1 \
        @opentelemetry/exporter-trace-otlp-http@0.57.2 @opentelemetry/exporter-trace-otlp-proto@0.57.2 \
        @opentelemetry/auto-instrumentations-node@0.56.1 next@15.1.7 react@19.0.0 react-dom@19.0.0 >/dev/null
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
fi
