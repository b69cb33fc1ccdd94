#!/usr/bin/env python3
"""A Debian base image for the container tests, made here instead of pulled.

The test machines reach no image registry, so ``python:3.12-slim`` (the Dockerfile's default
``BASE``) cannot be pulled. Instead this module debootstraps a minimal Debian (the host's own
release, ``--variant=minbase`` plus ``python3`` and ``python3-venv``) from the mirror the
machine's apt is configured with, trims documentation, locales and apt caches, and packs it as
a tarball for ``podman import``. The tarball is cached outside the repository, in
``${MINIBROKER_TEST_CACHE:-${XDG_CACHE_HOME:-~/.cache}/minibroker-tests}``, and reused when
present (about 130 MB, under a minute to make on a 2-core machine).

    python tests/docker/base_image.py          # make it now (prints its path)

Env: MINIBROKER_TEST_DEBIAN_MIRROR overrides the mirror read from /etc/apt.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ("python3", "python3-venv")
# Trimmed after debootstrap: nothing in the image reads them.
TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
        "usr/share/info", "usr/share/locale")


def cache_dir() -> Path:
    explicit = os.environ.get("MINIBROKER_TEST_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minibroker-tests"


def host_codename() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return "bookworm"
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.M)
    return m.group(1) if m else "bookworm"


def apt_mirror(codename: str) -> str:
    """The first Debian archive URI apt uses for ``codename`` (not the security archive)."""
    explicit = os.environ.get("MINIBROKER_TEST_DEBIAN_MIRROR")
    if explicit:
        return explicit
    candidates: list[str] = []
    sources = Path("/etc/apt/sources.list.d")
    for f in sorted(sources.glob("*.sources")) if sources.is_dir() else []:
        # deb822 stanzas: "Types: deb", "URIs: ...", "Suites: ..."
        for stanza in re.split(r"\n\s*\n", f.read_text(errors="replace")):
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line:
                    continue
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.split()
            if ("deb" in fields.get("types", []) and codename in fields.get("suites", [])
                    and fields.get("uris")):
                candidates.extend(fields["uris"])
    for f in [Path("/etc/apt/sources.list"), *sorted(sources.glob("*.list"))] if sources.is_dir() \
            else [Path("/etc/apt/sources.list")]:
        try:
            lines = f.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            parts = re.sub(r"\[[^]]*\]", "", line).split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == codename:
                candidates.append(parts[1])
    for uri in candidates:
        if "security" not in uri:
            return uri.rstrip("/")
    return "http://deb.debian.org/debian"


def tarball_path() -> Path:
    codename = host_codename()
    return cache_dir() / f"debian-{codename}-minbase-{'-'.join(PACKAGES)}.tar"


def ensure_tarball(log=lambda msg: print(msg, file=sys.stderr), lock_timeout: float = 900) -> Path:
    """The cached rootfs tarball, made first if missing (one maker at a time: a file lock)."""
    target = tarball_path()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".base-image.lock", "w") as lock:
        deadline = time.monotonic() + lock_timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another process holds {lock.name} for {lock_timeout:.0f} s")
                time.sleep(1)
        if target.exists():  # made by the process we waited for
            return target
        codename = host_codename()
        mirror = apt_mirror(codename)
        work = Path(tempfile.mkdtemp(prefix="minibroker-debootstrap-", dir=target.parent))
        try:
            rootfs = work / "rootfs"
            log(f"debootstrap --variant=minbase --include={','.join(PACKAGES)} {codename} from {mirror}")
            t0 = time.monotonic()
            proc = subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", codename,
                 str(rootfs), mirror],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(f"debootstrap failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
            for rel in TRIM:
                d = rootfs / rel
                if d.is_dir():
                    for child in d.iterdir():
                        if child.is_dir() and not child.is_symlink():
                            shutil.rmtree(child)
                        else:
                            child.unlink()
            partial = work / "rootfs.tar"
            subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."],
                           check=True, timeout=300)
            os.replace(partial, target)
            log(f"base image tarball {target} ({target.stat().st_size / 1e6:.0f} MB) made in "
                f"{time.monotonic() - t0:.0f} s")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


if __name__ == "__main__":
    print(ensure_tarball())
