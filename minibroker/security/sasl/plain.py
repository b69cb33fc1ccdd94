"""SASL/PLAIN (RFC 4616), the server side, sans-io: one message, ``authzid NUL user NUL password``.

Failures carry the messages of Kafka's PlainSaslServer; passwords are compared in constant time
and never logged.
"""

from __future__ import annotations

import hmac


class PlainError(Exception):
    pass


def authenticate(message: bytes, passwords) -> str:
    """The authenticated user name; ``passwords(user)`` gives a user's password or None."""
    parts = message.split(b"\x00")
    if len(parts) != 3:
        raise PlainError("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        raise PlainError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not user:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    expected = passwords(user)
    if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
        raise PlainError("Authentication failed: Invalid username or password")
    if authzid and authzid != user:
        raise PlainError("Authentication failed: Client requested an authorization id that is "
                         "different from username")
    return user
