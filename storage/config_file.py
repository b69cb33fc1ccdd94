"""One small JSON file of ``{"<section>": {name: {config: value}}}`` in the data dir, replaced
atomically: how the configs Kafka keeps as ConfigRecords in its metadata log (GROUP and
CLIENT_METRICS resources) outlive a restart here. A file that cannot be read raises the caller's
error class, so each caller reports it in its own words and starts without those configs.
"""

from __future__ import annotations

import json
from pathlib import Path

from .atomic_file import write_atomically


def load(path: Path, section: str, entry: str, error: type[ValueError]) -> dict[str, dict[str, str]]:
    """``entry``: what the file's keys are, as the error names them ("group", "name")."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise error(f"{path}: {e}") from None
    entries = data.get(section) if isinstance(data, dict) else None
    if not isinstance(entries, dict) or not all(
            isinstance(c, dict) and all(isinstance(v, str) for v in c.values()) for c in entries.values()):
        raise error(f'{path}: not {{"{section}": {{{entry}: {{config: value}}}}}}')
    return {str(k): dict(v) for k, v in entries.items()}


def save(path: Path, section: str, entries: dict[str, dict[str, str]], *, sync_dir: bool = False) -> None:
    write_atomically(path, json.dumps({section: entries}, indent=1, sort_keys=True), sync_dir=sync_dir)
