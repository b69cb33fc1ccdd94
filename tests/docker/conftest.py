"""Fixtures for the container tests: a private podman, the base image, the two images.

- ``podman``: one ``Podman`` (tests/docker/podman.py) per session, its storage in a temp dir
  that is removed at the end.
- ``base_image``: a Debian image made with debootstrap (tests/docker/base_image.py; the rootfs
  tarball is cached outside the repo) and ``podman import``-ed; the Dockerfile's ``BASE``.
- ``broker_image`` / ``examples_image``: docker/Dockerfile built on it (default target / the
  ``examples`` target), tagged as docker/compose.yaml names them.

The tests skip when podman, debootstrap or docker-compose is missing, with the reason; under
MINIBROKER_TEST_REQUIRE_TOOLS (set by tests/run.sh, which installs them) they fail instead.
Numbers measured on the way (build times, sizes, start → healthy) are printed at the end of
the run.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from .base_image import ensure_tarball
from .podman import Podman

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "docker" / "Dockerfile"
COMPOSE_FILE = REPO_ROOT / "docker" / "compose.yaml"
BROKER_TAG = "localhost/minibroker:dev"          # compose.yaml's image: minibroker:dev
EXAMPLES_TAG = "localhost/minibroker-examples:dev"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")

MEASURED: dict[str, str] = {}


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    msg = f"{', '.join(missing)} not installed (tests/run.sh installs them with apt-get)"
    if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
        pytest.fail(msg)
    pytest.skip(msg)


def need_podman() -> None:
    need_tools("podman", "runc", "debootstrap")
    if os.geteuid() != 0:
        msg = "the container tests run rootful podman (netavark networks, published ports): need root"
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(msg)
        pytest.skip(msg)


def pytest_terminal_summary(terminalreporter):
    if MEASURED:
        terminalreporter.section("container measurements")
        for k, v in MEASURED.items():
            terminalreporter.write_line(f"{k}: {v}")


@pytest.fixture(scope="session")
def podman():
    need_podman()
    p = Podman()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="session")
def base_image(podman) -> str:
    t0 = time.monotonic()
    tarball = ensure_tarball()
    MEASURED["base rootfs tarball (debootstrap, or cached)"] = \
        f"{time.monotonic() - t0:.1f} s, {tarball.stat().st_size / 1e6:.0f} MB"
    tag = "localhost/minibroker-test-base:latest"
    t0 = time.monotonic()
    podman.run("import", str(tarball), tag, timeout=300)
    MEASURED["podman import of the base"] = f"{time.monotonic() - t0:.1f} s"
    return tag


def build(podman: Podman, base: str, tag: str, target: str | None = None) -> str:
    args = ["build", "--format", "docker", "--network", "host", "-f", str(DOCKERFILE),
            "--build-arg", f"BASE={base}", "-t", tag]
    if target:
        args += ["--target", target]
    if HOST_CA.exists():
        # HTTPS is intercepted here: pip in the build must trust the host's CA bundle.
        args += ["-v", f"{HOST_CA}:/etc/ssl/certs/host-ca.crt:ro",
                 "--build-arg", "PIP_CERT=/etc/ssl/certs/host-ca.crt"]
    t0 = time.monotonic()
    podman.run(*args, str(REPO_ROOT), timeout=600)
    size = podman.inspect(tag, "image")["Size"]
    MEASURED[f"image {tag}"] = f"built in {time.monotonic() - t0:.1f} s, {size / 1e6:.0f} MB"
    return tag


@pytest.fixture(scope="session")
def broker_image(podman, base_image) -> str:
    return build(podman, base_image, BROKER_TAG)


@pytest.fixture(scope="session")
def examples_image(podman, base_image) -> str:
    return build(podman, base_image, EXAMPLES_TAG, target="examples")
