"""TLS for SSL listeners: one server context from PEM files (Kafka's ssl.keystore.type=PEM).

Kafka 4's defaults: TLS 1.2 and 1.3 only (ssl.enabled.protocols), client certificates per
``ssl.client.auth`` (none, requested, required) checked against the CA file. Imported only
when a listener is SSL, so plaintext start-up does not load ``ssl``.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
HANDSHAKE_TIMEOUT_S = 10.0


class TLSConfigError(ValueError):
    pass


class _DirectSSLObject(ssl.SSLObject):
    """An ``ssl.SSLObject`` whose ``read``, ``write`` and ``pending`` are ``_ssl``'s own methods.

    uvloop's TLS transport calls ``read`` and ``pending`` once per TLS record, and ssl.py's
    versions are Python frames that only forward their arguments. librdkafka writes a record
    per buffer segment, about one per 1 KiB message, so those two frames per KiB were a
    measurable part of the broker's CPU per GB over TLS. Same results and errors: ssl.py's
    wrappers pass their arguments through unchanged (every caller, uvloop's and asyncio's
    sslproto, gives ``read`` its size).
    """

    @classmethod
    def _create(cls, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self = super()._create(*args, **kwargs)  # type: ignore[misc]
        inner = self._sslobj
        self.read, self.write, self.pending = inner.read, inner.write, inner.pending
        return self


def server_context(certfile: Path, keyfile: Path, cafile: Path | None, client_auth: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.sslobject_class = _DirectSSLObject
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


# How Java's X500Principal.getName() (RFC 2253) names the attributes Python's ssl reports; others
# are written as their OID would be by Java, which ssl does not give, so by ssl's long name.
_RFC2253_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
                     "stateOrProvinceName": "ST", "organizationName": "O",
                     "organizationalUnitName": "OU", "streetAddress": "STREET",
                     "domainComponent": "DC", "userId": "UID"}


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out


def certificate_principal(peercert: dict | None) -> str:
    """Kafka's DefaultKafkaPrincipalBuilder for SSL: ``User:`` and the client certificate's
    subject in RFC 2253 form (most specific first), or User:ANONYMOUS without a certificate
    (ssl.client.auth=none, or requested and not sent)."""
    if not peercert or not peercert.get("subject"):
        return "User:ANONYMOUS"
    rdns = []
    for rdn in reversed(peercert["subject"]):
        rdns.append("+".join(f"{_RFC2253_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)
