#!/usr/bin/env bash
# Installs what building and testing Crossdock needs, from the registries only.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    rustup toolchain install stable --profile minimal
  else
    echo "setup: cargo is missing; install Rust with rustup (https://rustup.rs) or your package manager" >&2
    exit 1
  fi
fi
if command -v rustup >/dev/null 2>&1; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi
