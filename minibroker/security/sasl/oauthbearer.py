"""SASL/OAUTHBEARER (RFC 7628), the server side, sans-io, with the validator Kafka's broker uses by
default: OAuthBearerUnsecuredValidatorCallbackHandler, which accepts *unsecured* JWS tokens
(``alg`` "none", no signature) and is meant for development and tests only.

``OAuthBearerServer`` is one exchange's state machine, as Kafka's OAuthBearerSaslServer:

    start --initial response, token valid-----------> done          (answers b"")
          --initial response, token invalid---------> error_sent    (answers {"status":"invalid_token"})
          --malformed message, wrong authzid--------> OAuthBearerError
    error_sent --b"\\x01" (the client's kvsep)---------> OAuthBearerError, its message the same JSON
               --another initial response-----------> as from start (Kafka lets the client retry)

The broker answers the error JSON as a successful SaslAuthenticate response (error NONE, the JSON
as auth_bytes); the failure itself (SASL_AUTHENTICATION_FAILED) comes with the client's "\\x01".

Kafka's failures are of three kinds, and ``OAuthBearerError`` says which one:

* SaslAuthenticationException: its message goes to the client as is (``generic`` False);
* SaslException: SaslServerAuthenticator hides the reason behind ``GENERIC_FAILURE``
  (``generic`` True, ``reason`` the hidden message);
* an unexpected runtime exception (Kafka bugs: a header without "alg", an "auth" scheme other
  than Bearer): the broker closes the connection without any response (``answered`` False).

Option names and defaults are the JAAS options of Kafka's handler: unsecuredValidatorPrincipalClaimName
("sub"), unsecuredValidatorScopeClaimName ("scope"), unsecuredValidatorRequiredScope (none) and
unsecuredValidatorAllowableClockSkewMs (0). The clock is given, never read here.

The token's parts are decoded with the base64url alphabet, as Kafka 4.1 does (KAFKA-17089); up to
4.0 Kafka used the standard alphabet and refused a token whose JSON encodes to "-" or "_".
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MECHANISM = "OAUTHBEARER"
PRINCIPAL_CLAIM_NAME_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_NAME_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
ALLOWABLE_CLOCK_SKEW_MS_OPTION = "unsecuredValidatorAllowableClockSkewMs"
OPTIONS = (PRINCIPAL_CLAIM_NAME_OPTION, SCOPE_CLAIM_NAME_OPTION, REQUIRED_SCOPE_OPTION,
           ALLOWABLE_CLOCK_SKEW_MS_OPTION)

# SaslServerAuthenticator's answer to a SaslException ("re-authentication" when re-authenticating)
GENERIC_FAILURE = ("Authentication failed during authentication due to invalid credentials with SASL "
                   "mechanism OAUTHBEARER")
KVSEP = b"\x01"

_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1


class OAuthBearerError(Exception):
    """``str(exc)``: the error_message of Kafka's SaslAuthenticate response (for an authentication;
    when ``generic``, a re-authentication says "during re-authentication"). ``reason``: what Kafka
    logs. ``answered`` False: Kafka's broker closes the connection without answering."""

    def __init__(self, message: str, reason: str | None = None, *, generic: bool = False,
                 answered: bool = True) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason
        self.generic = generic
        self.answered = answered


class OAuthBearerConfigError(ValueError):
    """A bad unsecuredValidator* option (Kafka's OAuthBearerConfigException)."""


class InvalidTokenError(Exception):
    """A token Kafka's unsecured validator refuses (OAuthBearerIllegalTokenException): ``str(exc)``
    is its failure description (logged, never sent), ``scope`` the failure scope (required scope
    missing) or None."""

    def __init__(self, description: str, scope: str | None = None) -> None:
        super().__init__(description)
        self.scope = scope


def _sasl_exception(reason: str) -> OAuthBearerError:
    return OAuthBearerError(GENERIC_FAILURE, reason, generic=True)


# -- the client's initial response (OAuthBearerClientInitialResponse) ----------------------------

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # Java: [\x01-\x7F&&[^=,]]|=2C|=3D
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_VALUE}\x01)*)\x01")
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.A-Za-z0-9]+=*)")
AUTH_KEY = "auth"


@dataclass(frozen=True)
class InitialResponse:
    token: str
    authorization_id: str  # "" when not given; not decoded (=2C, =3D stay), as Kafka compares it
    extensions: dict[str, str]


def parse_initial_response(message: bytes) -> InitialResponse:
    """The client's first message, or OAuthBearerError as Kafka's parser fails it."""
    text = message.decode("utf-8", "replace")
    m = _CLIENT_INITIAL_RESPONSE.fullmatch(text)
    if m is None:
        raise _sasl_exception("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in m["kvpairs"].split("\x01")[:-1]:  # Utils.parseMap; a repeated key: the last wins
        key, value = pair.split("=", 1)
        pairs[key] = value
    auth = pairs.pop(AUTH_KEY, None)
    if auth is None:
        raise _sasl_exception("Invalid OAUTHBEARER client first message: 'auth' not specified")
    # the regex already holds every other key to 1*ALPHA and value to RFC 7628's value syntax, so
    # Kafka's validateExtensions cannot fail here ("auth" itself is taken as the token)
    a = _AUTH.fullmatch(auth)
    if a is None:
        raise _sasl_exception("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a["scheme"].lower() != "bearer":
        # Kafka means to throw SaslException("Invalid scheme ...") but builds its message with
        # matcher.group("scheme") on the wrong matcher: an IllegalArgumentException escapes instead
        raise OAuthBearerError(f"Invalid scheme in OAUTHBEARER client first message: {a['scheme']}",
                               "No group with name <scheme>", answered=False)
    return InitialResponse(a["token"], m["authzid"] or "", pairs)


def initial_response(token: str, authorization_id: str = "",
                     extensions: Mapping[str, str] | None = None) -> bytes:
    """A client's first message, as Kafka's and librdkafka's clients write it."""
    ext = "".join(f"\x01{k}={v}" for k, v in (extensions or {}).items())
    authzid = f"a={authorization_id}" if authorization_id else ""
    return f"n,{authzid},\x01auth=Bearer {token}{ext}\x01\x01".encode()


# -- the unsecured JWS (OAuthBearerUnsecuredJws) --------------------------------------------------

def _java_trim(s: str) -> str:
    return s.strip("".join(map(chr, range(0x21))))


def _java_long_round(x: float) -> int:  # Math.round(double)
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return _LONG_MAX if x > 0 else _LONG_MIN
    f = math.floor(x)
    return max(_LONG_MIN, min(_LONG_MAX, int(f) + (1 if x - f >= 0.5 else 0)))


def _double(n: int | float) -> float:  # Number.doubleValue()
    try:
        return float(n)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _java_double_text(x: float) -> str:  # Double.toString, with the shortest digits (JDK 19+)
    if math.isnan(x) or math.isinf(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, d = "-" if x < 0 else "", Decimal(repr(abs(x))).normalize()
    if 1e-3 <= abs(x) < 1e7:
        text = format(d, "f")
        return sign + (text if "." in text else text + ".0")
    digits = "".join(map(str, d.as_tuple().digits))
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{d.adjusted()}"


def _jackson_text(value: Any) -> str:  # JsonNode.asText()
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double_text(value)
    return ""  # an object or an array


def _convert(value: Any) -> Any:
    """Kafka's convert(JsonNode): an array is a list of texts, a number a number, anything else
    its text (true -> "true", null -> "null", an object -> "")."""
    if isinstance(value, list):
        return [_jackson_text(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _jackson_text(value)


def _java_type(value: Any) -> str:  # getClass().getSimpleName() of a converted claim
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    if -(2 ** 31) <= value < 2 ** 31:
        return "Integer"
    return "Long" if _LONG_MIN <= value <= _LONG_MAX else "BigInteger"


_B64URL = re.compile(r"([A-Za-z0-9_-]*)(=*)")


def _b64url_decode(text: str) -> bytes:
    """java.util.Base64's URL decoder: padding optional, but right when present (only the
    signature part can end in "=": the auth regex allows it at the token's end only)."""
    m = _B64URL.fullmatch(text)
    if m is None:
        raise ValueError(text)
    body, pad = m.groups()
    rem = len(body) % 4
    if rem == 1 or (pad and (rem == 0 or len(pad) != 4 - rem)):
        raise ValueError(text)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def _reject_constant(name: str) -> Any:
    raise ValueError(name)  # Jackson refuses NaN and Infinity by default


_JSON = json.JSONDecoder(parse_constant=_reject_constant)


def _to_map(part: str) -> dict[str, Any]:
    try:
        raw = _b64url_decode(part)
    except ValueError:
        raise InvalidTokenError("malformed Base64 URL encoded value") from None
    try:
        text = raw.decode("utf-8-sig").lstrip(" \t\r\n")
        if not text:
            return {}  # Jackson's MissingNode: no fields
        value, _ = _JSON.raw_decode(text)  # Jackson's readTree ignores what follows the value
    except (ValueError, RecursionError):
        raise InvalidTokenError("malformed JSON") from None
    if not isinstance(value, dict):
        return {}  # an array or a scalar has no fields
    return {k: _convert(v) for k, v in value.items()}


@dataclass(frozen=True)
class UnsecuredJws:
    value: str
    header: dict[str, Any]
    claims: dict[str, Any]
    principal: str
    scope: frozenset[str]
    expires_at_ms: int  # Kafka's OAuthBearerToken.lifetimeMs(): exp * 1000, rounded
    start_time_ms: int | None  # iat * 1000, if given


def _claim(claims: Mapping[str, Any], name: str, kind: type | tuple[type, ...], kind_name: str) -> Any:
    value = claims.get(name)
    if value is None or isinstance(value, kind):
        return value
    raise InvalidTokenError(f"The '{name}' claim was not of type {kind_name}: {_java_type(value)}")


def _number_claim(claims: Mapping[str, Any], name: str) -> int | float | None:
    return _claim(claims, name, (int, float), "Number")


def parse_unsecured_jws(token: str, principal_claim_name: str = "sub",
                        scope_claim_name: str = "scope") -> UnsecuredJws:
    """The token as Kafka's OAuthBearerUnsecuredJws reads it; InvalidTokenError when it refuses it."""
    if ".." in token:
        raise InvalidTokenError("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidTokenError(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    header, claims = _to_map(parts[0]), _to_map(parts[1])
    if "alg" not in header:
        # Objects.requireNonNull: a NullPointerException, not a refusal; the broker drops the connection
        raise OAuthBearerError("JWS header must have an Algorithm value", answered=False)
    if header["alg"] != "none":
        raise InvalidTokenError("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise InvalidTokenError("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, scope_claim_name)
    exp = _number_claim(claims, "exp")
    if exp is None:
        raise InvalidTokenError("No expiration time in JWT")
    principal = _claim(claims, principal_claim_name, str, "String")
    if principal is None or not _java_trim(principal):
        raise InvalidTokenError("No principal name in JWT claim: " + principal_claim_name)
    iat = _number_claim(claims, "iat")
    return UnsecuredJws(token, header, claims, principal, scope, _java_long_round(_double(exp) * 1000),
                        None if iat is None else _java_long_round(_double(iat) * 1000))


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):
        # a string claim is ONE scope element, spaces and all: Kafka does not split it
        return frozenset([_java_trim(value)]) if _java_trim(value) else frozenset()
    value = _claim(claims, name, list, "List")
    return frozenset(_java_trim(s) for s in value or () if _java_trim(s))


# -- the validator (OAuthBearerUnsecuredValidatorCallbackHandler, OAuthBearerValidationUtils) -----

_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")


def parse_scope(space_delimited: str) -> tuple[str, ...]:
    """OAuthBearerScopeUtils.parseScope: the required-scope option's elements."""
    items = [item for item in space_delimited.split(" ") if item]
    for item in items:
        if not _SCOPE_ITEM.fullmatch(item):
            raise OAuthBearerConfigError(f"Invalid scope value: {item}")
    return tuple(items)


def _java_list(items: Iterable[str]) -> str:  # List.toString()
    return "[" + ", ".join(items) + "]"


def validate_unsecured_token(token: str, now_ms: int, *, principal_claim_name: str = "sub",
                             scope_claim_name: str = "scope", required_scope: Iterable[str] = (),
                             allowable_clock_skew_ms: int = 0) -> UnsecuredJws:
    """The token, validated at ``now_ms`` as Kafka's unsecured validator does; InvalidTokenError
    (its description as Kafka logs it) when refused."""
    jws = parse_unsecured_jws(token, principal_claim_name, scope_claim_name)
    skew = allowable_clock_skew_ms
    iat = _number_claim(jws.claims, "iat")  # optional: Kafka validates it with required=false
    exp = _number_claim(jws.claims, "exp")
    assert exp is not None
    if iat is not None and 1000 * _double(iat) > now_ms + skew:
        raise InvalidTokenError(
            f"The Issued At value ({_double(iat):f} seconds) was after the indicated time ({now_ms} ms) "
            f"plus allowable clock skew ({skew} ms)")
    if now_ms - skew >= 1000 * _double(exp):
        raise InvalidTokenError(
            f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after "
            f"the Expiration Time value ({_double(exp):f} seconds)")
    if iat is not None and _double(exp) <= _double(iat):
        raise InvalidTokenError(
            f"The Expiration Time time ({_double(exp):f} seconds) was not after the Issued At time "
            f"({_double(iat):f} seconds)")
    required = list(required_scope)
    for element in required:
        if element not in jws.scope:
            raise InvalidTokenError(
                f"The provided scope ({_java_list(sorted(jws.scope))}) was missing a required scope "
                f"({element}).  All required scope elements: {_java_list(required)}",
                _java_list(required))
    return jws


def error_challenge(status: str, scope: str | None = None, openid_configuration: str | None = None) -> str:
    """OAuthBearerSaslServer's JSON error (spacing and all; values are not escaped, as in Kafka)."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    if openid_configuration is not None:
        text += f', "openid-configuration":"{openid_configuration}"'
    return text + "}"


# -- the exchange (OAuthBearerSaslServer) ---------------------------------------------------------

def _options(options: Mapping[str, Any] | None) -> tuple[str, str, tuple[str, ...], int]:
    opts = {k: str(v) for k, v in (options or {}).items()}

    def option(name: str, default: str) -> str:
        value = opts.get(name)
        return default if value is None or not _java_trim(value) else _java_trim(value)

    skew_text = option(ALLOWABLE_CLOCK_SKEW_MS_OPTION, "0")
    # Integer.parseInt: an optional sign, ASCII digits, 32 bits
    if not re.fullmatch(r"[+-]?[0-9]+", skew_text) or not -(2 ** 31) <= int(skew_text) < 2 ** 31:
        raise OAuthBearerConfigError(f'For input string: "{skew_text}"')
    skew = int(skew_text)
    if skew < 0:
        raise OAuthBearerConfigError(
            f"Allowable clock skew millis must not be negative: {opts[ALLOWABLE_CLOCK_SKEW_MS_OPTION]}")
    return (option(PRINCIPAL_CLAIM_NAME_OPTION, "sub"), option(SCOPE_CLAIM_NAME_OPTION, "scope"),
            parse_scope(option(REQUIRED_SCOPE_OPTION, "")), skew)


class OAuthBearerServer:
    """One OAUTHBEARER exchange. ``now_ms``: the wall clock in ms, an int or a callable read when
    a token is validated. ``options``: the unsecuredValidator* JAAS options (strings); a bad one
    raises OAuthBearerConfigError here, where Kafka fails at each validation instead."""

    mechanism = MECHANISM

    def __init__(self, now_ms: int | Callable[[], int], options: Mapping[str, Any] | None = None) -> None:
        self._clock: Callable[[], int] = now_ms if callable(now_ms) else (lambda: now_ms)
        (self.principal_claim_name, self.scope_claim_name, self.required_scope,
         self.allowable_clock_skew_ms) = _options(options)
        self.state = "start"
        self.complete = False
        self.principal: str | None = None  # the authorization id: the token's principal
        self.token: UnsecuredJws | None = None
        self.extensions: dict[str, str] = {}
        self.expires_at_ms: int | None = None
        self.authenticated_at_ms: int | None = None
        self.failure_reason: str | None = None  # why the last token was refused (Kafka logs it)
        self._error: str | None = None

    def _fail(self, error: OAuthBearerError) -> OAuthBearerError:
        self.state = "failed"
        return error

    def respond(self, message: bytes) -> bytes:
        """The server's answer to a client message: b"" when authenticated, the JSON error
        challenge for a refused token; OAuthBearerError when the exchange fails."""
        if self.state in ("done", "failed"):
            raise self._fail(OAuthBearerError(f"Unexpected OAUTHBEARER message in state {self.state}",
                                              answered=False))
        if message == KVSEP and self._error is not None:
            raise self._fail(OAuthBearerError(self._error))
        self._error = None
        try:
            response = parse_initial_response(message)
        except OAuthBearerError as e:
            raise self._fail(e) from None
        now = self._clock()
        try:
            jws = validate_unsecured_token(
                response.token, now, principal_claim_name=self.principal_claim_name,
                scope_claim_name=self.scope_claim_name, required_scope=self.required_scope,
                allowable_clock_skew_ms=self.allowable_clock_skew_ms)
        except InvalidTokenError as e:
            self.failure_reason = str(e)
            self._error = error_challenge("insufficient_scope" if e.scope is not None else "invalid_token",
                                          e.scope)
            self.state = "error_sent"
            return self._error.encode()
        except OAuthBearerError as e:
            raise self._fail(e) from None
        if response.authorization_id and response.authorization_id != jws.principal:
            raise self._fail(OAuthBearerError(
                f"Authentication failed: Client requested an authorization id ({response.authorization_id}) "
                f"that is different from the token's principal name ({jws.principal})"))
        # the unsecured handler declares every extension valid
        self.token, self.principal, self.extensions = jws, jws.principal, dict(response.extensions)
        self.expires_at_ms, self.authenticated_at_ms = jws.expires_at_ms, now
        self.failure_reason = None
        self.complete, self.state = True, "done"
        return b""

    def session_lifetime_ms(self, now_ms: int | None = None,
                            connections_max_reauth_ms: int | None = None) -> int:
        """SaslAuthenticate's session_lifetime_ms as SaslServerAuthenticator computes it (KIP-368):
        the token's remaining life, capped by connections.max.reauth.ms when that is > 0."""
        if not self.complete or self.expires_at_ms is None:
            return 0
        now = self.authenticated_at_ms if now_ms is None else now_ms
        assert now is not None
        remaining = self.expires_at_ms - now
        if connections_max_reauth_ms is not None and connections_max_reauth_ms > 0:
            remaining = min(remaining, connections_max_reauth_ms)
        return max(0, remaining)


# -- the client side, for tests and docs ----------------------------------------------------------

def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_token(sub: str, lifetime_s: int = 3600, now_ms: int = 0,
                    scope: str | Iterable[str] | None = None, *, principal_claim_name: str = "sub",
                    scope_claim_name: str = "scope", claims: Mapping[str, Any] | None = None) -> str:
    """An unsecured JWS as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes it: header
    {"alg":"none"}; claims exp and iat (seconds, fractional), the principal, then any others;
    base64url without padding; an empty signature. ``scope``: a space-separated string or the
    elements, written as a JSON array (unsecuredLoginListClaim_scope)."""
    now_s = now_ms / 1000.0
    body: dict[str, Any] = {"exp": now_s + lifetime_s, "iat": now_s, principal_claim_name: sub}
    if scope is not None:
        body[scope_claim_name] = scope.split() if isinstance(scope, str) else list(scope)
    body.update(claims or {})
    header = json.dumps({"alg": "none"}, separators=(",", ":")).encode()
    return f"{_b64url(header)}.{_b64url(json.dumps(body, separators=(',', ':')).encode())}."
