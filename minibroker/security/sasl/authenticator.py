"""One SASL connection's authentication, sans-io: which requests it may send now, the handshake,
the token exchange, the session's end and re-authentication (KIP-368).

Theory of operation (Kafka's SaslServerAuthenticator, clients/src/main/java/org/apache/kafka/
common/security/authenticator/SaslServerAuthenticator.java, and the re-authentication hooks of
KafkaChannel and SocketServer):

    versions   --ApiVersions-->            handshake
    versions   --SaslHandshake(ok)-->      authenticate
    handshake  --SaslHandshake(ok)-->      authenticate
    authenticate --SaslAuthenticate(more)--> authenticate
    authenticate --SaslAuthenticate(done)--> authenticated
    authenticated --SaslHandshake (session with an end, >= 1 s since the last start)--> authenticate
    any state --a request it does not allow, a bad mechanism, bad credentials--> failed (closed)

Before ``authenticated`` a connection may send only ApiVersions (once, first), SaslHandshake and
SaslAuthenticate; anything else closes it. Kafka answers a wrong request during the token
exchange with that request's error response before closing; one sent before the handshake is
just closed. After authentication, a request arriving once the session has ended closes the
connection ("Disconnecting expired channel"), unless it is the SaslHandshake that re-authenticates.

Failures are ``AuthenticationFailed``: the caller answers with ``error_code``/``message`` (when
``answer`` is true) and closes the connection. Messages are Kafka's; a mechanism's own message
reaches the client only when it begins "Authentication failed" (Kafka's SaslAuthenticationException);
any other failure is answered with Kafka's generic text, which never says whether the user exists.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode

from . import plain
from .common import AuthenticationFailed
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramError, ScramServer

# KafkaChannel.maybeBeginServerReauthentication: at most one re-authentication a second
MIN_REAUTH_INTERVAL_MS = 1_000


class _Plain:
    """PLAIN in the shape of the multi-step mechanisms."""

    def __init__(self, passwords: Callable[[str], str | None]) -> None:
        self.passwords = passwords
        self.complete = False
        self.username: str | None = None
        self.expires_at_ms: int | None = None

    def respond(self, message: bytes) -> bytes:
        parts = message.split(b"\x00")
        if len(parts) == 3:
            self.username = parts[1].decode(errors="replace") or None
        self.username = plain.authenticate(message, self.passwords)
        self.complete = True
        return b""


class _Scram:
    def __init__(self, mechanism: str, lookup: Callable[[str, str], Any], tokens: Any = None) -> None:
        token_lookup = None
        if tokens is not None and tokens.enabled:
            def token_lookup(token_id: str) -> tuple[Any, str, int] | None:
                found = tokens.scram(token_id, mechanism)
                if found is None:
                    return None
                credential, token = found
                return credential, token.owner[1], token.expiry_ms
        self.server = ScramServer(mechanism, lambda user: lookup(user, mechanism),
                                  token_lookup=token_lookup)

    @property
    def complete(self) -> bool:
        return self.server.state == "done"

    @property
    def username(self) -> str | None:
        # once complete, who the session is: a token's owner (the name the client gave was the
        # token id)
        if self.complete:
            return self.server.authorization_id
        return self.server.username

    @property
    def token_authenticated(self) -> bool:
        return self.server.token_authenticated

    @property
    def expires_at_ms(self) -> int | None:
        # SaslServerAuthenticator: a token's session ends with the token (CREDENTIAL_LIFETIME_MS)
        return self.server.token_expiry_ms

    def respond(self, message: bytes) -> bytes:
        return self.server.respond(message)


class Authenticator:
    """``credentials``: minibroker.security.sasl.credentials.Credentials. ``now_ms``: the clock.
    ``max_reauth_ms``: connections.max.reauth.ms (0: sessions end only with their credential)."""

    def __init__(self, mechanisms: tuple[str, ...], credentials: Any, now_ms: Callable[[], int],
                 max_reauth_ms: int = 0, oauth_options: dict[str, str] | None = None,
                 tokens: Any = None) -> None:
        self.mechanisms = mechanisms
        self.credentials = credentials
        # minibroker.security.tokens.DelegationTokens: SCRAM logins with tokenauth=true
        self.tokens = tokens
        # Kafka's KafkaPrincipal.tokenAuthenticated: such a session may not manage tokens
        self.token_authenticated = False
        self.now_ms = now_ms
        self.max_reauth_ms = max_reauth_ms
        self.oauth_options = oauth_options or {}
        self.state = "versions"
        self.mechanism: str | None = None
        self.principal: str | None = None     # "User:NAME" once authenticated
        self.session_ends_ms: int | None = None
        self.reauthenticating = False
        self.reauth_started_ms: int | None = None  # when the last re-authentication began
        self.reauthentications = 0
        # SaslHandshake v0: the tokens come as bare frames, without a Kafka request header
        self.raw_tokens = False
        self._server: Any = None

    @property
    def authenticated(self) -> bool:
        return self.state == "authenticated"

    def expired(self) -> bool:
        return self.session_ends_ms is not None and self.now_ms() >= self.session_ends_ms

    def _what(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # -- gate -----------------------------------------------------------------------------
    def admit(self, api_key: int) -> bool:
        """Whether a request may go on to its handler; False: the authenticator answers it (the
        SASL APIs, whose handlers call ``handshake``/``authenticate``). Raises
        ``AuthenticationFailed`` for a request that closes the connection."""
        state = self.state
        if state == "authenticated":
            if api_key == ApiKey.SaslHandshake and self.may_reauthenticate():
                return False
            if self.expired():
                raise AuthenticationFailed(ErrorCode.sasl_authentication_failed,
                                           "session expired", "session_expired", answer=False,
                                           user=self.principal)
            return True
        if state == "versions" and api_key == ApiKey.ApiVersions:
            self.state = "handshake"
            return True
        if state in ("versions", "handshake"):
            if api_key == ApiKey.SaslHandshake:
                return False
            raise AuthenticationFailed(ErrorCode.illegal_sasl_state,
                                       f"Unexpected Kafka request of type {_name(api_key)} during "
                                       "SASL handshake.", "unexpected_request", answer=False)
        if state == "authenticate":
            if api_key == ApiKey.SaslAuthenticate:
                return False
            raise AuthenticationFailed(ErrorCode.illegal_sasl_state,
                                       f"Unexpected Kafka request of type {_name(api_key)} during "
                                       "SASL authentication.", "unexpected_request")
        raise AuthenticationFailed(ErrorCode.illegal_sasl_state, "authentication failed",
                                   "after_failure", answer=False)

    def may_reauthenticate(self) -> bool:
        # KafkaChannel.maybeBeginServerReauthentication: a session with an end may re-authenticate;
        # a second re-authentication within a second of the last one's start may not (the first
        # authentication does not count)
        last = self.reauth_started_ms
        return self.session_ends_ms is not None and (
            last is None or self.now_ms() - last >= MIN_REAUTH_INTERVAL_MS)

    # -- SaslHandshake ---------------------------------------------------------------------
    def handshake(self, mechanism: str) -> None:
        """Raises for a mechanism not enabled (the answer lists the enabled ones)."""
        if self.state == "authenticated":
            self.reauthenticating = True
            self.reauth_started_ms = self.now_ms()
            if mechanism != self.mechanism:
                self.state = "failed"
                raise AuthenticationFailed(
                    ErrorCode.illegal_sasl_state,
                    f"Re-authentication must use the same SASL mechanism ({self.mechanism}), "
                    f"not {mechanism}", "mechanism_changed")
        if mechanism not in self.mechanisms:
            self.state = "failed"
            raise AuthenticationFailed(ErrorCode.unsupported_sasl_mechanism,
                                       f"Unsupported SASL mechanism {mechanism}",
                                       "unsupported_mechanism")
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = "authenticate"

    def _new_server(self, mechanism: str) -> Any:
        if mechanism == "PLAIN":
            return _Plain(self.credentials.password)
        if mechanism in SCRAM_MECHANISMS:
            return _Scram(mechanism, self.credentials.scram, self.tokens)
        from .oauthbearer import OAuthBearerServer
        return OAuthBearerServer(self.now_ms, self.oauth_options)

    # -- SaslAuthenticate ------------------------------------------------------------------
    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """The server's token and, once complete, the session lifetime in ms (0: no end)."""
        server = self._server
        assert server is not None and self.mechanism is not None  # state "authenticate"
        try:
            answer = server.respond(token)
        except plain.PlainError as e:
            # PlainSaslServer throws SaslAuthenticationException for every refusal, its format
            # errors too: the client gets the text (checked against Kafka 4.4, test_sasl.py)
            raise self._failed(str(e), False, True, getattr(server, "username", None)) from None
        except ScramError as e:
            # ScramSaslServer: an unknown user or token and a wrong proof are SaslExceptions, which
            # the client sees only as the generic text (checked against Kafka 4.4,
            # tests/differential/test_delegation_tokens.py)
            raise self._failed(str(e), not e.visible, True, getattr(server, "username", None)) from None
        except Exception as e:
            # OAUTHBEARER's OAuthBearerError says itself whether its text may reach the client
            if type(e).__name__ != "OAuthBearerError":
                raise
            raise self._failed(str(e), e.generic, e.answered,  # type: ignore[attr-defined]
                               getattr(server, "principal", None),
                               getattr(e, "reason", None)) from None
        if not server.complete:
            return answer, 0
        principal = f"User:{_user(server)}"
        if self.reauthenticating and principal != self.principal:
            self.state = "failed"
            raise AuthenticationFailed(
                ErrorCode.sasl_authentication_failed,
                f"Cannot change principals during re-authentication from {self.principal}: "
                f"{principal}", "principal_changed", user=_user(server))
        lifetime = self._session_lifetime(getattr(server, "expires_at_ms", None))
        self.principal = principal
        self.token_authenticated = bool(getattr(server, "token_authenticated", False))
        self.state = "authenticated"
        if self.reauthenticating:
            self.reauthentications += 1
        self._server = None
        return answer, lifetime

    def _failed(self, text: str, generic: bool, answered: bool, user: str | None,
                detail: str | None = None) -> AuthenticationFailed:
        # Kafka's SaslException: the client gets a generic text that never says whether the user
        # exists; the log gets the mechanism's own words.
        self.state = "failed"
        message = (f"Authentication failed during {self._what()} due to invalid credentials with "
                   f"SASL mechanism {self.mechanism}") if generic else text
        reason = f"invalid_message: {detail or text}" if generic else "invalid_credentials"
        return AuthenticationFailed(ErrorCode.sasl_authentication_failed, message, reason,
                                    answer=answered, user=user)

    def _session_lifetime(self, credential_ends_ms: int | None) -> int:
        # SaslServerAuthenticator.calcCompletionTimesAndReturnSessionLifetimeMs: the earlier of
        # the credential's end and connections.max.reauth.ms; no end when neither is set.
        now = self.now_ms()
        limits = []
        if credential_ends_ms is not None:
            limits.append(max(0, credential_ends_ms - now))
        if self.max_reauth_ms > 0:
            limits.append(self.max_reauth_ms)
        if not limits:
            self.session_ends_ms = None
            return 0
        lifetime = min(limits)
        self.session_ends_ms = now + lifetime
        return lifetime


def _user(server: Any) -> str | None:
    return getattr(server, "username", None) or getattr(server, "principal", None)


def _name(api_key: int) -> str:
    # Kafka names an api in these messages by its ApiKeys constant: API_VERSIONS, METADATA
    try:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", ApiKey(api_key).name).upper()
    except ValueError:
        return str(api_key)
