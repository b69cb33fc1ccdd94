"""``group-configs.json``: each group's own configs (GROUP config resources).

Kafka keeps them as ConfigRecords in its metadata log, so they outlive a restart; here one
small JSON file in the data dir, replaced atomically. A file that cannot be read is reported,
never fatal: the broker then starts with every group at the broker defaults.
"""

from __future__ import annotations

import json
from pathlib import Path

from .atomic_file import write_atomically

FILE = "group-configs.json"


class GroupConfigsFileError(ValueError):
    pass


def load(data_dir: Path) -> dict[str, dict[str, str]]:
    path = Path(data_dir) / FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise GroupConfigsFileError(f"{path}: {e}") from None
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, dict) or not all(
            isinstance(c, dict) and all(isinstance(v, str) for v in c.values()) for c in groups.values()):
        raise GroupConfigsFileError(f"{path}: not {{\"groups\": {{group: {{config: value}}}}}}")
    return {str(k): dict(v) for k, v in groups.items()}


def save(data_dir: Path, groups: dict[str, dict[str, str]]) -> None:
    # sync_dir: an acknowledged IncrementalAlterConfigs must survive a crash, as Kafka's
    # committed metadata record does
    write_atomically(Path(data_dir) / FILE, json.dumps({"groups": groups}, indent=1, sort_keys=True),
                     sync_dir=True)
