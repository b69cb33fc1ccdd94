"""Run another checkout's minibroker: a PYTHONPATH under the installed names.

A checkout's folders are minibroker/, protocol/ and storage/, but the code imports
``minibroker_protocol`` and ``minibroker_storage`` (the names the wheel installs). A temp dir of
symlinks under those names, put first on PYTHONPATH, makes ``python -m minibroker`` run that
checkout's code and not the editable install's (setuptools appends its editable finder to
``sys.meta_path``, after the path finder that reads PYTHONPATH). Used by the differential
suite's ``--checkout`` and by bench/run.py's ``--baseline``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

FOLDERS = (("minibroker", "minibroker"), ("minibroker_protocol", "protocol"),
           ("minibroker_storage", "storage"))


def checkout_path(checkout: str) -> str:
    root = Path(checkout).resolve()
    # minibroker/cli.py before issue 30's layout, minibroker/cli/main.py since; __main__.py in both
    if not any((root / "minibroker" / f).is_file() for f in ("__main__.py", "cli.py")):
        raise SystemExit(f"{checkout}: no minibroker checkout there")
    shim = Path(tempfile.mkdtemp(prefix="minibroker-checkout-"))
    for name, folder in FOLDERS:
        if (root / folder).is_dir():
            (shim / name).symlink_to(root / folder)
    # A checkout from before the rename imports ``protocol`` and ``storage`` from its root.
    return f"{shim}:{root}"
