#!/bin/sh
# Installs what the test suite needs on a fresh Debian-like machine, in two parts:
#
#   sh tests/bootstrap.sh fast      the fast tests (python3 -m pytest -m "not browser"): Reticle's three
#                                   runtime dependencies and the test tools (pytest, the mcp SDK, ruff,
#                                   mypy, the web frameworks), at the versions tests/requirements.txt pins,
#                                   into the running python3's environment (the README makes it a fresh
#                                   .venv); it writes nothing into the checkout
#   sh tests/bootstrap.sh browser   the rest: Debian's chromium, PostgreSQL and PHP's command line (with its SQLite
#                                   and PostgreSQL drivers), and the npm packages the browser tests drive (React,
#                                   Hotwire Turbo, htmx, Express with pg and TypeORM, Next.js and React Router 7
#                                   with OpenTelemetry) and ESLint for the SDK's lint, into tests/.js and
#                                   tests/.otel (kept out of git)
#   sh tests/bootstrap.sh           both: what the whole suite (python3 -m pytest) and CI need
set -eu
part="${1:-all}"
case "$part" in
    fast|browser|all) ;;
    *) echo "usage: sh tests/bootstrap.sh [fast|browser]" >&2; exit 2 ;;
esac
here=$(dirname "$0")

apt_install() {
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    fi
}

if [ "$part" != browser ]; then
    # tests/requirements.txt pins every package the tests import, Reticle's three runtime dependencies included
    # (tests/test_requirements.py checks they are setup.cfg's): the tests import reticle.py from the checkout, so
    # nothing of the checkout is built or installed here. The README runs this inside a fresh virtual environment.
    started=$(date +%s)
    python3 -m pip install --quiet -r "$here/requirements.txt"
    echo "bootstrap: the Python test dependencies installed in $(( $(date +%s) - started )) s into $(python3 -c 'import sys; print(sys.prefix)')"
fi
[ "$part" = fast ] && exit 0

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    apt_install chromium
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    apt_install postgresql
fi
# PHP's command line (its built-in server) for the plain PHP form in tests/test_server.py
if ! command -v php >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    apt_install php-cli
fi
# PHP's PDO drivers for SQLite and PostgreSQL, for the PHP app whose store Reticle watches (tests/test_store_apps.py)
if command -v php >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    php -m | grep -qx pdo_sqlite || apt_install php-sqlite3
    php -m | grep -qx pdo_pgsql || apt_install php-pgsql
fi
command -v npm >/dev/null 2>&1 || { echo "bootstrap: npm is not installed; the npm-backed tests will skip" >&2; exit 0; }
# React's UMD builds for the real-React test.
if [ ! -f "$here/.js/node_modules/react-dom/umd/react-dom.development.js" ]; then
    npm install --prefix "$here/.js" --no-audit --no-fund --silent react@18.3.1 react-dom@18.3.1 >/dev/null
fi
# ESLint for `python3 tools/sdk.py lint` (the in-page scripts of src/sdk/).
if [ ! -f "$here/.js/node_modules/globals/package.json" ]; then
    npm install --prefix "$here/.js" --no-audit --no-fund --silent eslint@10.15.0 globals@17.14.0 >/dev/null
fi
# Hotwire Turbo 8 (Turbo Drive form posts that follow their 303 in a fetch) for tests/test_horizon.py.
if [ ! -f "$here/.js/node_modules/@hotwired/turbo/dist/turbo.es2017-umd.js" ]; then
    npm install --prefix "$here/.js" --no-audit --no-fund --silent @hotwired/turbo@8.0.23 >/dev/null
fi
# htmx 2 (its answers swapped after the form, appended, out of band) for tests/test_shapes.py.
if [ ! -f "$here/.js/node_modules/htmx.org/dist/htmx.min.js" ]; then
    npm install --prefix "$here/.js" --no-audit --no-fund --silent htmx.org@2.0.11 >/dev/null
fi
# Real Express (with pg, and with TypeORM over pg), Next.js and React Router 7 (framework mode, Vite) apps with
# stock OpenTelemetry instrumentation for tests/test_otel.py, and Vite with Vue's single-file components for
# tests/test_evidence.py (releases that run on Node 20), into their own folder.
if [ ! -f "$here/.otel/node_modules/@react-router/dev/package.json" ] || [ ! -f "$here/.otel/node_modules/@vitejs/plugin-vue/package.json" ] \
        || [ ! -f "$here/.otel/node_modules/@opentelemetry/instrumentation-typeorm/package.json" ]; then
    npm install --prefix "$here/.otel" --no-audit --no-fund --silent express@4.21.2 pg@8.13.1 @opentelemetry/api@1.9.0 \
        @opentelemetry/sdk-node@0.57.2 @opentelemetry/instrumentation@0.57.2 @opentelemetry/instrumentation-http@0.57.2 \
        @opentelemetry/instrumentation-express@0.47.1 @opentelemetry/instrumentation-pg@0.51.1 \
        @opentelemetry/exporter-trace-otlp-http@0.57.2 @opentelemetry/exporter-trace-otlp-proto@0.57.2 \
        @opentelemetry/auto-instrumentations-node@0.56.1 next@15.1.7 react@19.0.0 react-dom@19.0.0 \
        react-router@7.6.3 @react-router/dev@7.6.3 @react-router/node@7.6.3 vite@6.3.5 isbot@5.1.28 \
        vue@3.5.13 @vitejs/plugin-vue@5.2.1 typeorm@1.1.3 reflect-metadata@0.2.2 \
        @opentelemetry/instrumentation-typeorm@0.22.0 >/dev/null
fi
