"""``group-configs.json``: each group's own configs (GROUP config resources).

Kafka keeps them as ConfigRecords in its metadata log, so they outlive a restart; here one
small JSON file in the data dir, replaced atomically. A file that cannot be read is reported,
never fatal: the broker then starts with every group at the broker defaults.
"""

from __future__ import annotations

from pathlib import Path

from . import config_file

FILE = "group-configs.json"


class GroupConfigsFileError(ValueError):
    pass


def load(data_dir: Path) -> dict[str, dict[str, str]]:
    return config_file.load(Path(data_dir) / FILE, "groups", "group", GroupConfigsFileError)


def save(data_dir: Path, groups: dict[str, dict[str, str]]) -> None:
    # sync_dir: an acknowledged IncrementalAlterConfigs must survive a crash, as Kafka's
    # committed metadata record does
    config_file.save(Path(data_dir) / FILE, "groups", groups, sync_dir=True)
