"""``client-quotas.json``: the client quotas AlterClientQuotas set (KIP-546).

Kafka keeps them as ClientQuotaRecords in its metadata log, so they outlive a restart; here one
small JSON file in the data dir, replaced atomically after each change, holding the entities in
the order they were first given a quota (Kafka answers DescribeClientQuotas in the order of a
Java HashMap, which depends on that order when two entities share a bucket). A file that cannot
be read is reported, never fatal: the broker then starts without quotas.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .atomic_file import write_atomically

FILE = "client-quotas.json"
_TYPES = ("user", "client-id", "ip")

# one entity: {entity type: name, None for the default entity} and its {quota key: value}
Entry = tuple[dict[str, str | None], dict[str, float]]


class ClientQuotasFileError(ValueError):
    pass


def load(data_dir: Path) -> list[Entry]:
    path = Path(data_dir) / FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ClientQuotasFileError(f"{path}: {e}") from None
    entries = data.get("quotas") if isinstance(data, dict) else None
    shape = f'{path}: not {{"quotas": [{{"entity": {{type: name or null}}, "quotas": {{key: number}}}}]}}'
    if not isinstance(entries, list):
        raise ClientQuotasFileError(shape)
    out: list[Entry] = []
    for item in entries:
        entity = item.get("entity") if isinstance(item, dict) else None
        quotas = item.get("quotas") if isinstance(item, dict) else None
        if not (isinstance(entity, dict) and entity and isinstance(quotas, dict) and quotas
                and all(t in _TYPES and (n is None or isinstance(n, str)) for t, n in entity.items())
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                        for v in quotas.values())):
            raise ClientQuotasFileError(shape)
        out.append((dict(entity), {str(k): float(v) for k, v in quotas.items()}))
    return out


def save(data_dir: Path, entries: list[Entry]) -> None:
    # sync_dir: an acknowledged AlterClientQuotas must survive a crash, as Kafka's committed
    # metadata record does
    text = json.dumps({"quotas": [{"entity": ent, "quotas": q} for ent, q in entries]}, indent=1)
    write_atomically(Path(data_dir) / FILE, text, sync_dir=True)
