"""``meta.properties``: the data directory's identity, as Kafka keeps it."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path


def _new_cluster_id() -> str:
    # Kafka's Uuid.randomUuid().toString(): url-safe base64 of 16 bytes, unpadded.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def load_or_create(data_dir: Path, node_id: int) -> dict[str, str]:
    path = Path(data_dir) / "meta.properties"
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
    if "cluster.id" in props:
        return props
    props = {"version": "1", "cluster.id": _new_cluster_id(), "node.id": str(node_id)}
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write("#minibroker\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return props
