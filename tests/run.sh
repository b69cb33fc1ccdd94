#!/usr/bin/env bash
# Install what the test suite needs and run all of it (unit + integration):
#
#   bash tests/run.sh [extra pytest arguments...]
#
# or only the quick tier, the inner loop (under 3 minutes on 2 cores, install included):
#
#   bash tests/run.sh --quick [extra pytest arguments...]
#
# --quick creates .venv if missing and installs the project with its [test] extra only (no spark,
# no system packages, JDK, jars, Go, npm or podman), runs ruff and mypy as below, then
# `python -m pytest -p no:cacheprovider --quick tests "$@"`: the unit and sans-io tests and a
# handful of real-client smoke tests (confluent-kafka, kafka-python, kcat where installed, the
# control plane's CLI), the selection tests/conftest.py makes (QUICK_DIRS, NOT_QUICK, QUICK_SMOKE).
# Tools it lacks skip their tests rather than fail (MINIBROKER_TEST_REQUIRE_TOOLS is not set).
#
# Works from a fresh clone on Debian with Python >= 3.11 and node/npm:
#   - creates .venv (if missing) and installs the project with its [test] and [spark] extras;
#   - installs kcat with apt-get if it is not on PATH (sudo only when not root);
#   - installs Debian's chromium if missing, for the web console's test (Playwright drives it:
#     no `playwright install`, no browser download);
#   - installs KafkaJS into tests/js/node_modules (npm ci from package-lock.json);
#   - installs a JDK (default-jdk-headless) if javac is missing and Maven if mvn is missing, and
#     caches the kafka-clients 4.4.0 jars from Maven Central outside the repo
#     (python -m tests.integration.java_client fetch);
#   - gets the kafka-clients releases 0.11.0.3 to 4.4.0 into ~/.m2 for the client matrix
#     (python -m tests.integration.client_matrix fetch);
#   - caches Kafka Streams 4.4.0 and its runtime jars (RocksDB) the same way
#     (python -m tests.integration.streams_app fetch), for the exactly-once Streams app test, and
#     Kafka Connect 4.3.1 (python -m tests.integration.connect_worker fetch) for the Connect one;
#   - installs Maven if missing and fetches Apache Kafka 4.4.0 (org.apache.kafka:kafka_2.13 and its
#     runtime jars, pinned in tests/reference/pom.xml) into ~/.cache/minibroker-tests/kafka-4.4.0/libs
#     for the differential tests (tests/differential), which run it as the reference broker;
#   - fetches Apache Avro 1.12.2 (tests/differential/avro_java/pom.xml) into
#     ~/.cache/minibroker-tests/avro-1.12.2/libs and compiles the AVRO format's differential
#     program against it (python -m tests.differential.avro_java fetch);
#   - builds the franz-go test program (tests/go/mbgo; Go from the machine, else Go's release from the
#     Go module proxy; modules at go.sum's versions) and franz-go's own pkg/kgo test suite
#     (go test -c, same version) into ~/.cache/minibroker-tests/go-bin;
#   - installs podman, runc, netavark, aardvark-dns, iptables, debootstrap and docker-compose if
#     missing, for the container tests (tests/docker; their Debian base image is made with
#     debootstrap and cached in ${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/);
#   - runs `ruff check` and `mypy` on the product packages (exit 1 on any finding), then
#     `python -m pytest -p no:cacheprovider -n 2 --dist loadfile tests "$@"` (two pytest-xdist
#     workers; MINIBROKER_TEST_WORKERS=N for N, 0 for none); the exit code is pytest's.
# Integration tests then fail (instead of skipping) when kcat, node, kafkajs, javac or the jars are missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

QUICK=0
if [ "${1:-}" = "--quick" ]; then
    QUICK=1
    shift
fi

log() { printf 'tests/run.sh: %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

APT_UPDATED=0
apt_install() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
    log "apt-get install $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- Python >= 3.11 and the virtualenv --------------------------------------------------
find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3 python3.13 python3.12 python3.11; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if [ ! -x .venv/bin/python ]; then
    PY="$(find_python)" || { log "need Python >= 3.11 (set PYTHON=/path/to/python3.11)"; exit 2; }
    log "creating .venv with $PY"
    if ! "$PY" -m venv .venv 2>/dev/null; then
        rm -rf .venv
        apt_install python3-venv
        "$PY" -m venv .venv
    fi
fi
VENV_PY="$ROOT/.venv/bin/python"

# --- lint and type checks ([tool.ruff] and [tool.mypy] in pyproject.toml) ------------------
# Before the tests: a type error or lint finding fails the run in seconds, not after them.
lint_and_types() {
    log "ruff check minibroker protocol storage"; "$VENV_PY" -m ruff check minibroker protocol storage || { log "ruff found problems"; exit 1; }
    log "mypy"; "$VENV_PY" -m mypy || { log "mypy found problems"; exit 1; }
}

if [ "$QUICK" -eq 1 ]; then
    log "pip install -e '.[test]'"
    "$VENV_PY" -m pip install --quiet --disable-pip-version-check -e '.[test]'
    lint_and_types
    log "python -m pytest -p no:cacheprovider --quick --durations=10 tests $*"
    set +e
    "$VENV_PY" -m pytest -p no:cacheprovider --quick --durations=10 tests "$@"
    status=$?
    set -e
    exit "$status"
fi

log "pip install -e '.[test,spark]'"
"$VENV_PY" -m pip install --quiet --disable-pip-version-check -e '.[test,spark]'

# --- kcat (Debian's package: librdkafka 2.0.2) -----------------------------------------------
if ! command -v kcat >/dev/null 2>&1; then
    apt_install kcat
fi

# --- chromium, for the web console's browser test (Playwright drives Debian's build) -------------
if ! command -v chromium >/dev/null 2>&1; then
    apt_install chromium
fi

# --- KafkaJS ---------------------------------------------------------------------------
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    apt_install nodejs npm
fi
log "npm ci (tests/js)"
(
    cd tests/js
    if [ -f package-lock.json ]; then
        npm ci --no-audit --no-fund --loglevel=error
    else
        npm install --no-audit --no-fund --loglevel=error
    fi
)

# --- the stock Java client (kafka-clients 4.4.0) -------------------------------------------
# javac/java 17 and Maven from Debian; the jars come from Maven Central (mvn
# dependency:copy-dependencies on tests/integration/java/pom.xml), copied into a cache outside
# the repo (${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/) and reused when already there.
# MINIBROKER_TEST_JAVA_LIBS=/dir/of/jars skips the download.
if ! command -v javac >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
    apt_install default-jdk-headless
fi
if ! command -v mvn >/dev/null 2>&1; then
    apt_install maven
fi
if [ -z "${MINIBROKER_TEST_JAVA_LIBS:-}" ]; then
    log "kafka-clients jars (python -m tests.integration.java_client fetch)"
    "$VENV_PY" -m tests.integration.java_client fetch
fi

# --- every Java client release since 0.11 (tests/integration/test_java_matrix.py) ---------------
# kafka-clients 0.11.0.3 ... 4.4.0 into Maven's repository (mvn dependency:get; ~/.m2).
log "kafka-clients releases 0.11 to 4.4 (python -m tests.integration.client_matrix fetch)"
"$VENV_PY" -m tests.integration.client_matrix fetch

# --- Kafka Streams 4.4.0, the exactly-once application (tests/integration/test_streams_eos.py) ----
# kafka-streams and its runtime dependencies (RocksDB) from Maven Central (tests/integration/streams/
# pom.xml) into ${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/kafka-streams-4.4.0/libs.
log "kafka-streams jars (python -m tests.integration.streams_app fetch)"
"$VENV_PY" -m tests.integration.streams_app fetch

# --- Kafka Connect 4.3.1, the exactly-once source (tests/integration/test_connect_eos.py) --------
# connect-runtime, connect-file and their runtime dependencies (tests/integration/connect/pom.xml)
# into ${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/kafka-connect-4.3.1/libs.
log "Kafka Connect jars (python -m tests.integration.connect_worker fetch)"
"$VENV_PY" -m tests.integration.connect_worker fetch

# --- Apache Kafka, the reference of the differential tests (tests/differential) ------------------
# kafka_2.13 4.4.0 and its runtime dependencies from Maven Central (tests/reference/pom.xml),
# copied into ${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/kafka-4.4.0/libs (Maven's own
# repository stays ~/.m2); nothing is fetched when that directory is complete.
# MINIBROKER_TEST_KAFKA_LIBS=/dir/of/jars skips the download.
if [ -z "${MINIBROKER_TEST_KAFKA_LIBS:-}" ]; then
    log "Apache Kafka jars (python -m tests.reference.kafka fetch)"
    "$VENV_PY" -m tests.reference.kafka fetch >/dev/null
fi

# --- Apache Avro (Java), the reference of the AVRO schema format (tests/differential/test_avro_java.py) --
# avro 1.12.2 and its runtime jars from Maven Central (tests/differential/avro_java/pom.xml) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/avro-1.12.2/libs, and AvroCheck.java compiled
# against them into the cache's java-classes; nothing is fetched when already there. The same jars,
# with kafka-clients', are the classpath of the Schema Registry's Java client
# (tests/integration/registry_java, compiled by tests/integration/test_schema_registry_java.py).
log "Apache Avro jars (python -m tests.differential.avro_java fetch)"
"$VENV_PY" -m tests.differential.avro_java fetch >/dev/null

# --- franz-go, the Go client (tests/go/mbgo) -----------------------------------------------------
# franz-go 1.22 needs Go >= 1.26. A go >= 1.21 on PATH or in /usr/local/go fetches that release
# itself (GOTOOLCHAIN=auto); with none (or Debian 12's 1.19), tests.integration.franz_go downloads
# Go's release from the Go module proxy (the module golang.org/toolchain) into the cache. Modules
# at go.sum's versions and the binary are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/go*.
log "franz-go test program (python -m tests.integration.franz_go build)"
"$VENV_PY" -m tests.integration.franz_go build >/dev/null
# franz-go's own pkg/kgo integration tests, unchanged, compiled from the module proxy's zip of the
# same version (go test -c), run against --brokers 3 by tests/integration/test_franz_go_suite.py.
log "franz-go's own test suite (python -m tests.integration.franz_go_suite build)"
"$VENV_PY" -m tests.integration.franz_go_suite build >/dev/null

# --- container tests (tests/docker): podman, runc, debootstrap, docker-compose -------------------
# No Docker engine here: tests/docker builds and runs docker/Dockerfile with Debian's rootful
# podman (runc, netavark + aardvark-dns for compose networks), on a Debian base it makes with
# debootstrap (cached in ${XDG_CACHE_HOME:-$HOME/.cache}/minibroker-tests/), and drives
# docker/compose.yaml with Debian's docker-compose 1.29 through `podman system service`.
CONTAINER_PKGS=()
for pkg in podman runc netavark aardvark-dns iptables debootstrap docker-compose; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
        CONTAINER_PKGS+=("$pkg")
done
if [ "${#CONTAINER_PKGS[@]}" -gt 0 ]; then
    apt_install "${CONTAINER_PKGS[@]}"
fi

lint_and_types

# --- the suite ---------------------------------------------------------------------------
export MINIBROKER_TEST_REQUIRE_TOOLS=1
# Two workers (pytest-xdist), one test file (or a folder of tests/conftest.py's WHOLE_FOLDERS) at a
# time each: the suite waits far more than it computes, so the second core would otherwise idle.
# MINIBROKER_TEST_WORKERS=0 runs it in one process.
WORKERS="${MINIBROKER_TEST_WORKERS:-2}"
XDIST=()
if [ "$WORKERS" != "0" ]; then
    XDIST=(-n "$WORKERS" --dist loadfile)
fi
log "python -m pytest -p no:cacheprovider ${XDIST[*]} --durations=30 tests $*"
set +e
"$VENV_PY" -m pytest -p no:cacheprovider "${XDIST[@]}" --durations=30 tests "$@"
status=$?
set -e
exit "$status"
