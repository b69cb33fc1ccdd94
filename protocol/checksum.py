"""CRC-32C (Castagnoli), the checksum of record batches and of minibroker's own snapshot files.

The ``crc32c`` package computes it in C, but its ``__init__`` reads its own version through
importlib.metadata (and so imports ``email``), which costs more than the rest of a broker's
start-up path to its first answer (issues 21, 33): ~10 ms of CPU on a broker's first produce.
So the C extension, ``crc32c._crc32c``, is loaded by itself from the package's directory,
without running that ``__init__`` (the package is then imported as usual only if the extension
cannot be found that way), and only on the first checksum: call ``checksum.crc32c(data)``
through this module; after the first call that name is the C function itself.
"""

from __future__ import annotations

from collections.abc import Callable


def _extension() -> Callable[..., int] | None:
    """``crc32c._crc32c.crc32c`` loaded from its file, or None when it is not found there."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    name = "crc32c._crc32c"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded.crc32c
    spec = importlib.util.find_spec("crc32c")  # finds the package, does not run it
    if spec is None or not spec.submodule_search_locations:
        return None
    for where in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(where, "_crc32c" + suffix)
            if os.path.exists(path):
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                ext_spec = importlib.util.spec_from_file_location(name, path, loader=loader)
                if ext_spec is None:
                    return None
                module = importlib.util.module_from_spec(ext_spec)
                loader.exec_module(module)
                return module.crc32c
    return None


def crc32c(data, /) -> int:  # replaced by the crc32c package's own on first use
    fast = _extension()
    if fast is None:
        import importlib
        fast = importlib.import_module("crc32c").crc32c
    globals()["crc32c"] = fast
    return fast(data)
