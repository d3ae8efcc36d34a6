#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: PostgreSQL 15 with server
# headers, clang for bindgen, the hll extension (benchmark reference), rustfmt
# and clippy, cargo-pgrx 0.18.0 and its config pointing at Debian's pg_config.
# Safe to run repeatedly.
set -euo pipefail
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

packages=(postgresql-15 postgresql-server-dev-15 postgresql-15-hll libclang-dev clang sudo make python3 python3-venv procps)
# The client suite (tests/clients) runs node-postgres: Debian's node and npm,
# unless a node with its npm is installed already.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export PATH="$HOME/.cargo/bin:$PATH"
# make test-core runs cargo fmt and cargo clippy.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  echo "setup: adding the rustfmt and clippy components"
  rustup component add rustfmt clippy
fi
if ! cargo pgrx --version 2>/dev/null | grep -q "0.18.0"; then
  echo "setup: installing cargo-pgrx 0.18.0 (a few minutes)"
  cargo install cargo-pgrx --version 0.18.0 --locked --quiet
fi
if ! grep -qs "pg15 = \"$PG_CONFIG\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
  cargo pgrx init --pg15 "$PG_CONFIG" >/dev/null
fi
echo "setup: ok"
