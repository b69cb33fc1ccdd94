"""The reference Kafka's ApiVersions answer against minibroker's, key by key and version by
version (issue 32): every client-facing key Kafka 4.4 advertises is served by minibroker at the
same range, unless divergences.py says why not.

The reference is the session's Kafka (tests/conftest.py: one combined KRaft node, with the
share-group and streams protocols its 4.4 defaults enable, and a client metrics receiver when a
JDK compiled one). A failure lists every key that is missing, behind, ahead or extra.
"""

from __future__ import annotations

from minibroker_protocol.api_keys import ApiKey

from .divergences import API_KEYS_NOT_SERVED, API_VERSION_RANGES, TELEMETRY_API_KEYS


def _name(key: int) -> str:
    try:
        return f"{ApiKey(key).name} ({key})"
    except ValueError:
        return f"api key {key}"


def compare(kafka: dict[int, tuple[int, int]], mini: dict[int, tuple[int, int]]) -> list[str]:
    """Every difference not explained by divergences.py, one line each."""
    problems = []
    for key in sorted(set(kafka) | set(mini)):
        k, m = kafka.get(key), mini.get(key)
        name = _name(key)
        if key in API_KEYS_NOT_SERVED:
            if m is not None:
                problems.append(f"{name}: divergences.API_KEYS_NOT_SERVED says minibroker does not serve it, "
                                f"but it advertises v{m[0]}-{m[1]}")
            continue
        if k is None:
            problems.append(f"{name}: minibroker advertises v{m[0]}-{m[1]}, Kafka 4.4 does not serve it")
            continue
        if m is None:
            problems.append(f"{name}: MISSING (Kafka 4.4 serves v{k[0]}-{k[1]})")
            continue
        expected = API_VERSION_RANGES[key][0] if key in API_VERSION_RANGES else k
        if m[1] < expected[1]:
            problems.append(f"{name}: BEHIND, minibroker stops at v{m[1]}, Kafka 4.4 serves up to v{k[1]}")
        elif m[1] > expected[1]:
            problems.append(f"{name}: AHEAD, minibroker advertises v{m[1]}, Kafka 4.4 only up to v{k[1]}")
        if m[0] != expected[0]:
            problems.append(f"{name}: lowest version v{m[0]}, expected v{expected[0]} (Kafka 4.4: v{k[0]})")
    return problems


def test_minibroker_advertises_what_kafka_advertises(differential_pair):
    kafka, mini = differential_pair.kafka.versions, differential_pair.mini.versions
    # the pair gives both brokers a client metrics receiver, or neither
    assert all((key in kafka) == (key in mini) for key in TELEMETRY_API_KEYS), (
        [(k, kafka.get(k), mini.get(k)) for k in TELEMETRY_API_KEYS])
    problems = compare(kafka, mini)
    assert not problems, ("minibroker's ApiVersions differs from Kafka 4.4's:\n  " + "\n  ".join(problems))


def test_the_comparison_reports_each_kind_of_difference():
    kafka = {0: (0, 13), 3: (0, 13), 10: (0, 6), 34: (1, 2), 38: (1, 3), 80: (0, 1)}
    mini = {0: (3, 13), 3: (0, 13), 10: (0, 5), 38: (1, 3), 99: (0, 0)}
    got = compare(kafka, mini)
    assert any(line.startswith("FindCoordinator (10): BEHIND") for line in got), got
    assert any(line.startswith("AlterReplicaLogDirs (34): MISSING") for line in got), got
    assert any(line.startswith("api key 99:") for line in got), got
    assert not any("Produce" in line or "Metadata" in line or "80" in line for line in got), got
