"""A request that fails for want of descriptors or memory is a logged disconnect, not a traceback.

At the fd limit even importing a schema module on a request's first use fails (EMFILE, often
wrapped in an ImportError); tests/integration/test_connection_memory.py provokes it for real.
"""

from __future__ import annotations

import errno

from minibroker.net.server import _out_of_resources


def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except OSError as e:
            raise ImportError("cannot import kio.schema.api_versions.v0") from e
    except ImportError as wrapped:
        return wrapped


def test_emfile_behind_an_import_error_is_found():
    e = _raised_from(OSError(errno.EMFILE, "Too many open files"))
    found = _out_of_resources(e)
    assert found is not None and found.errno == errno.EMFILE


def test_other_failures_are_not_resource_shortages():
    assert _out_of_resources(_raised_from(OSError(errno.ENOENT, "No such file"))) is None
    assert _out_of_resources(ValueError("bug")) is None
