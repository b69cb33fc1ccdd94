"""``client-metrics.json``: the KIP-714 client metrics subscriptions (CLIENT_METRICS configs).

Kafka keeps them as ConfigRecords in its metadata log; here one small JSON file in the data
dir, replaced atomically, so a subscription survives a restart. A file that cannot be read is
reported, never fatal: the broker then starts without subscriptions.
"""

from __future__ import annotations

from pathlib import Path

from . import config_file

FILE = "client-metrics.json"


class ClientMetricsFileError(ValueError):
    pass


def load(data_dir: Path) -> dict[str, dict[str, str]]:
    return config_file.load(Path(data_dir) / FILE, "subscriptions", "name", ClientMetricsFileError)


def save(data_dir: Path, subscriptions: dict[str, dict[str, str]]) -> None:
    config_file.save(Path(data_dir) / FILE, "subscriptions", subscriptions)
