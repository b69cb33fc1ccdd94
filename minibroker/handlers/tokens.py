"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken, DescribeDelegationToken.

As Kafka 4.4 answers them: the broker's checks first (KafkaApis.handleCreateTokenRequest and its
siblings, ControllerApis for the forwarded ones, core/src/main/scala/kafka/server/), then the
controller's (DelegationTokenControlManager, minibroker/security/tokens.py):

- a connection that is PLAINTEXT, SSL without a client certificate, or itself authenticated with
  a token gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (KafkaApis.allowTokenRequests);
- Create for another owner needs CREATE_TOKENS on that User resource, else
  DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer that is not a User is INVALID_PRINCIPAL_TYPE;
  then, without a secret key, DELEGATION_TOKEN_AUTH_DISABLED;
- Describe lists the tokens the caller owns or renews, and others' only with DESCRIBE on the
  token or DESCRIBE_TOKENS on the owner's User resource (DelegationTokenManager.filterToken).

A refusal from the broker's checks answers -1 timestamps (DelegationTokenManager.ErrorTimestamp);
one from the controller's answers its response's defaults, 0.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from typing import Any

from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode

from ..security.sasl.common import ANONYMOUS
from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import ZERO, answers, response_cls

_UTC = datetime.UTC
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
ERROR_TIMESTAMP = -1  # DelegationTokenManager.ErrorTimestamp


def _at(ms: int) -> datetime.datetime:
    # datetime_i64 fields: kio writes round(timestamp * 1000)
    return _EPOCH + datetime.timedelta(milliseconds=ms)


def _ms(d: Any) -> int:
    return int(d / datetime.timedelta(milliseconds=1)) if isinstance(d, datetime.timedelta) else int(d)


# The furthest a request's period or lifetime is taken to reach, in ms (about 31,700 years): kio
# reads these int64 fields as timedeltas, which stop near 8.6e16 ms, while Kafka takes any long
# (DelegationTokenControlManager.sum saturates). Anything this long is capped by the broker's own
# lifetimes first, so the answer is the same.
_LONGEST_MS = 10**15


def _clamping(api_key: int) -> Callable[[Any, int], Any]:
    """The request decoder of a token API whose last field, an int64 period or lifetime, may hold
    any long (Long.MAX_VALUE from a tool): read it clamped instead of refusing the request."""

    def decode(body: Any, version: int) -> Any:
        try:
            return codec.decode_request(api_key, version, body)
        except codec.DecodeError as e:
            if "overflow" not in str(e):
                raise
        raw = bytearray(body)
        # the int64 ends the body (v1), or comes just before an empty tagged-field section (v2+)
        end = len(raw) if not codec.is_flexible_request(api_key, version) else len(raw) - 1
        if end < 8 or (end != len(raw) and raw[end] != 0):
            raise codec.DecodeError(f"api {api_key} v{version}: an int64 out of range")
        (value,) = struct.unpack_from(">q", raw, end - 8)
        struct.pack_into(">q", raw, end - 8, -1 if value < 0 else min(value, _LONGEST_MS))
        return codec.decode_request(api_key, version, bytes(raw))

    return decode


def _principal(ctx: RequestContext) -> tuple[str, str]:
    ptype, _, name = getattr(ctx.connection, "principal", ANONYMOUS).partition(":")
    return ptype, name


def allow_token_requests(ctx: RequestContext) -> bool:
    """KafkaApis.allowTokenRequests: not over PLAINTEXT, not from a token-authenticated session,
    not over SSL without a client certificate (User:ANONYMOUS)."""
    conn = ctx.connection
    auth = getattr(conn, "auth", None)
    if auth is not None:  # a SASL listener
        return not getattr(auth, "token_authenticated", False)
    # PLAINTEXT and certificate-less SSL are User:ANONYMOUS; an SSL client certificate is not
    return getattr(conn, "principal", ANONYMOUS) != ANONYMOUS


class TokenHandlers:
    def __init__(self, *, tokens: Any, authz: Authz = OFF) -> None:
        # a callable: the tokens file is read on the token APIs' first use, not at start-up
        self._tokens = tokens
        self.authz = authz

    @property
    def tokens(self) -> Any:
        return self._tokens()

    def apis(self) -> list[Api]:
        return [Api(ApiKey.CreateDelegationToken, 1, 3, self.create,
                    decoder=_clamping(ApiKey.CreateDelegationToken)),
                Api(ApiKey.RenewDelegationToken, 1, 2, self.renew,
                    decoder=_clamping(ApiKey.RenewDelegationToken)),
                Api(ApiKey.ExpireDelegationToken, 1, 2, self.expire,
                    decoder=_clamping(ApiKey.ExpireDelegationToken)),
                Api(ApiKey.DescribeDelegationToken, 1, 3, self.describe)]

    # -- CreateDelegationToken --------------------------------------------------------------
    @answers
    def create(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        requester = _principal(ctx)
        owner = requester
        owner_name = getattr(req, "owner_principal_name", None)  # v3+
        if owner_name:
            owner = (req.owner_principal_type or "", owner_name)

        def refused(code: int, stamp: int, owner: tuple[str, str] = owner,
                    requester: tuple[str, str] = requester) -> Any:
            # (build keeps the requester fields for v3+ only, as prepareResponse does)
            return build(R, error_code=code, principal_type=owner[0], principal_name=owner[1],
                         token_requester_principal_type=requester[0],
                         token_requester_principal_name=requester[1],
                         issue_timestamp=_at(stamp), expiry_timestamp=_at(stamp),
                         max_timestamp=_at(stamp), token_id="", hmac=b"", throttle_time=ZERO)

        if not allow_token_requests(ctx):
            return refused(ErrorCode.delegation_token_request_not_allowed, ERROR_TIMESTAMP)
        if owner != requester and not self.authz.allowed(ctx, Op.CREATE_TOKENS, Res.USER,
                                                         f"{owner[0]}:{owner[1]}"):
            return refused(ErrorCode.delegation_token_authorization_failed, ERROR_TIMESTAMP)
        renewers = [(r.principal_type, r.principal_name) for r in req.renewers]
        if any(r[0] != "User" for r in renewers):
            return refused(ErrorCode.invalid_principal_type, ERROR_TIMESTAMP)
        out = self.tokens.create(owner, requester, renewers, _ms(req.max_lifetime))
        if out.error != ErrorCode.none:
            # the controller's answer carries no timestamps (its defaults, 0)
            return refused(out.error, 0)
        t = out.token
        return build(R, error_code=ErrorCode.none, principal_type=t.owner[0],
                     principal_name=t.owner[1], token_requester_principal_type=t.requester[0],
                     token_requester_principal_name=t.requester[1], issue_timestamp=_at(t.issue_ms),
                     expiry_timestamp=_at(t.expiry_ms), max_timestamp=_at(t.max_ms),
                     token_id=t.token_id, hmac=t.hmac, throttle_time=ZERO)

    # -- RenewDelegationToken / ExpireDelegationToken ---------------------------------------
    @answers
    def renew(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not allow_token_requests(ctx):
            return build(R, error_code=ErrorCode.delegation_token_request_not_allowed,
                         expiry_timestamp=_at(ERROR_TIMESTAMP), throttle_time=ZERO)
        out = self.tokens.renew(_principal(ctx), bytes(req.hmac), _ms(req.renew_period))
        return build(R, error_code=out.error, expiry_timestamp=_at(out.expiry_ms), throttle_time=ZERO)

    @answers
    def expire(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not allow_token_requests(ctx):
            return build(R, error_code=ErrorCode.delegation_token_request_not_allowed,
                         expiry_timestamp=_at(ERROR_TIMESTAMP), throttle_time=ZERO)
        out = self.tokens.expire(_principal(ctx), bytes(req.hmac), _ms(req.expiry_time_period))
        return build(R, error_code=out.error, expiry_timestamp=_at(out.expiry_ms), throttle_time=ZERO)

    # -- DescribeDelegationToken ------------------------------------------------------------
    @answers
    def describe(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not allow_token_requests(ctx):
            return build(R, error_code=ErrorCode.delegation_token_request_not_allowed, tokens=(),
                         throttle_time=ZERO)
        tokens = self.tokens
        if not tokens.enabled:
            return build(R, error_code=ErrorCode.delegation_token_auth_disabled, tokens=(),
                         throttle_time=ZERO)
        if req.owners is not None and not req.owners:
            return build(R, error_code=ErrorCode.none, tokens=(), throttle_time=ZERO)
        owners = None if req.owners is None else [(o.principal_type, o.principal_name)
                                                   for o in req.owners]
        me = _principal(ctx)

        def eligible(t: Any) -> bool:
            # DelegationTokenManager.filterToken
            if owners is not None and not any(t.owner_or_renewer(o) for o in owners):
                return False
            if t.owner_or_renewer(me):
                return True
            return (self.authz.allowed(ctx, Op.DESCRIBE, Res.DELEGATION_TOKEN, t.token_id)
                    or self.authz.allowed(ctx, Op.DESCRIBE_TOKENS, Res.USER,
                                          f"{t.owner[0]}:{t.owner[1]}"))

        Token = nested(R, "DescribedDelegationToken")
        Renewer = nested(R, "DescribedDelegationTokenRenewer")
        out = []
        for t in tokens.all():
            if not eligible(t):
                continue
            out.append(build(Token, principal_type=t.owner[0], principal_name=t.owner[1],
                             token_requester_principal_type=t.requester[0],
                             token_requester_principal_name=t.requester[1],
                             issue_timestamp=t.issue_ms, expiry_timestamp=t.expiry_ms,
                             max_timestamp=t.max_ms, token_id=t.token_id, hmac=t.hmac,
                             renewers=tuple(build(Renewer, principal_type=r[0], principal_name=r[1])
                                            for r in t.renewers)))
        return build(R, error_code=ErrorCode.none, tokens=tuple(out), throttle_time=ZERO)
