"""--client-opt KEY=VALUE: librdkafka settings for the example clients (TLS and SASL in
docker/compose.sasl.yaml). Beside the examples in /opt/examples, so each imports it."""

from __future__ import annotations


def client_opts(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--client-opt {pair!r}: expected KEY=VALUE")
        out[key] = value
    return out
