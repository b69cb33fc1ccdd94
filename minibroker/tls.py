"""TLS for SSL listeners: one server context from PEM files (Kafka's ssl.keystore.type=PEM).

Kafka 4's defaults: TLS 1.2 and 1.3 only (ssl.enabled.protocols), client certificates per
``ssl.client.auth`` (none, requested, required) checked against the CA file. Imported only
when a listener is SSL, so plaintext start-up does not load ``ssl``.
"""

from __future__ import annotations

import ssl
from pathlib import Path

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
HANDSHAKE_TIMEOUT_S = 10.0


class TLSConfigError(ValueError):
    pass


def server_context(certfile: Path, keyfile: Path, cafile: Path | None, client_auth: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as e:
        raise TLSConfigError(f"--ssl-certfile {certfile} / --ssl-keyfile {keyfile}: {e}") from None
    if cafile is not None:
        try:
            ctx.load_verify_locations(cafile)
        except (OSError, ssl.SSLError) as e:
            raise TLSConfigError(f"--ssl-cafile {cafile}: {e}") from None
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    return ctx
