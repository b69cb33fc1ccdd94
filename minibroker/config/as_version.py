"""``--as-version X.Y``: advertise and accept only what that Apache Kafka release's broker served,
so a client's fallback paths (transactions v1, classic groups, older Produce and Fetch) can be
tested against this one binary.

Each API minibroker serves is capped to the release's range (minibroker/config/kafka_releases.py, read
from that release's own kafka-clients jar); an API the release did not serve is left out of
ApiVersions and refused like any unknown key. Before 4.0 the KIP-848 consumer group APIs are left
out too: 3.7–3.9 brokers served them only with ``group.coordinator.rebalance.protocols``
including ``consumer``, not their default. The finalized features a pre-4.0 broker had are none:
``transaction.version`` and ``group.version`` are 0 (options.py refuses setting them higher).
"""

from __future__ import annotations

from minibroker_protocol.api_keys import ApiKey

CONSUMER_GROUP_APIS = (ApiKey.ConsumerGroupHeartbeat, ApiKey.ConsumerGroupDescribe)


def releases() -> list[str]:
    from .kafka_releases import RELEASES
    return list(RELEASES)


def parse_release(text: str) -> str:
    """``X.Y`` (a patch part is ignored: ``3.9.1`` is 3.9) of a release the table knows."""
    from .kafka_releases import RELEASES
    parts = text.strip().split(".")
    release = ".".join(parts[:2])
    if len(parts) < 2 or release not in RELEASES:
        raise ValueError(f"must be a Kafka release: {', '.join(RELEASES)}")
    return release


def parse_max_versions(text: str) -> dict[int, int]:
    """``EndTxn=3,Produce=9`` (Kafka's API names or keys) -> {api key: newest version}."""
    out: dict[int, int] = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, sep, version = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r}: write API=VERSION, e.g. EndTxn=3")
        key = next((k for k in ApiKey if k.name.lower() == name.strip().lower()), None)
        if key is None and name.strip().isdigit():
            key = next((k for k in ApiKey if int(k) == int(name)), None)
        if key is None:
            raise ValueError(f"{name.strip()!r} is not an API name as Kafka spells them "
                             "(EndTxn, Produce, ...)")
        try:
            out[int(key)] = int(version)
        except ValueError:
            raise ValueError(f"{item!r}: the version must be an integer") from None
        if out[int(key)] < 0:
            raise ValueError(f"{item!r}: the version must be >= 0")
    return out


def before_4(release: str) -> bool:
    return int(release.split(".")[0]) < 4
