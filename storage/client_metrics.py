"""``client-metrics.json``: the KIP-714 client metrics subscriptions (CLIENT_METRICS configs).

Kafka keeps them as ConfigRecords in its metadata log; here one small JSON file in the data
dir, replaced atomically, so a subscription survives a restart. A file that cannot be read is
reported, never fatal: the broker then starts without subscriptions.
"""

from __future__ import annotations

import json
from pathlib import Path

from .atomic_file import write_atomically

FILE = "client-metrics.json"


class ClientMetricsFileError(ValueError):
    pass


def load(data_dir: Path) -> dict[str, dict[str, str]]:
    path = Path(data_dir) / FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ClientMetricsFileError(f"{path}: {e}") from None
    subs = data.get("subscriptions") if isinstance(data, dict) else None
    if not isinstance(subs, dict) or not all(
            isinstance(c, dict) and all(isinstance(v, str) for v in c.values()) for c in subs.values()):
        raise ClientMetricsFileError(f"{path}: not {{\"subscriptions\": {{name: {{config: value}}}}}}")
    return {str(k): dict(v) for k, v in subs.items()}


def save(data_dir: Path, subscriptions: dict[str, dict[str, str]]) -> None:
    write_atomically(Path(data_dir) / FILE,
                     json.dumps({"subscriptions": subscriptions}, indent=1, sort_keys=True))
