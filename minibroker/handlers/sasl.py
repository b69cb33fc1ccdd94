"""SaslHandshake, SaslAuthenticate and the SCRAM credential APIs.

On a SASL listener the connection's ``auth`` (minibroker/security/sasl/authenticator.py) answers the
handshake and the token exchange; on any other listener, and after authentication without a
re-authentication due, Kafka's KafkaApis answers both with ILLEGAL_SASL_STATE
(handleSaslHandshakeRequest / handleSaslAuthenticateRequest), and so does this.

Describe/AlterUserScramCredentials follow Kafka's ScramImage.describe and
ScramControlManager.alterCredentials (metadata/src/main/java/org/apache/kafka/...): one change
per user per request, credentials made from the salted password the client computed.
"""

from __future__ import annotations

import datetime
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ..security.sasl.common import AuthenticationFailed
from .api import Api, RequestContext, Response
from .authz import OFF, Authz, Op
from .common import ZERO, answers, response_cls

log = get_logger("minibroker.sasl")

# ScramMechanism.type() on the wire
SCRAM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: t for t, name in SCRAM_TYPES.items()}
MAX_ITERATIONS = 16_384  # ScramControlManager.MAX_ITERATIONS


class SaslHandlers:
    def __init__(self, *, credentials: Any, authz: Authz = OFF) -> None:
        # DescribeUserScramCredentials needs DESCRIBE on the cluster, Alter ALTER (KafkaApis,
        # ControllerApis)
        self.authz = authz
        # a callable: the users are read on the credential APIs' first use, not at start-up
        self._credentials = credentials

    @property
    def credentials(self) -> Any:
        return self._credentials()

    def apis(self) -> list[Api]:
        return [Api(ApiKey.SaslHandshake, 0, 1, self.handshake),
                Api(ApiKey.SaslAuthenticate, 0, 2, self.authenticate),
                Api(ApiKey.DescribeUserScramCredentials, 0, 0, self.describe_credentials),
                Api(ApiKey.AlterUserScramCredentials, 0, 0, self.alter_credentials)]

    # -- the exchange ----------------------------------------------------------------------
    def handshake(self, ctx: RequestContext, req: Any) -> Response:
        R = response_cls(ctx)
        auth = getattr(ctx.connection, "auth", None)
        if auth is None or (auth.authenticated and not auth.may_reauthenticate()):
            return Response.of(ctx.correlation_id, build(R, error_code=ErrorCode.illegal_sasl_state,
                                                         mechanisms=()))
        reauth = auth.authenticated
        try:
            auth.handshake(req.mechanism)
        except AuthenticationFailed as e:
            _failed(ctx, e, req.mechanism)
            return _closing(ctx, Response.of(ctx.correlation_id, build(
                R, error_code=e.error_code, mechanisms=auth.mechanisms)), e)
        if ctx.api_version == 0:
            auth.raw_tokens = True  # v0: the tokens follow as bare frames, no Kafka header
        if reauth:
            log.debug("sasl.reauthentication_started", conn=ctx.connection.conn_id,
                      peer=_peer(ctx), principal=auth.principal)
        return Response.of(ctx.correlation_id, build(R, error_code=ErrorCode.none,
                                                     mechanisms=auth.mechanisms))

    def authenticate(self, ctx: RequestContext, req: Any) -> Response:
        R = response_cls(ctx)
        lifetime_field = {"session_lifetime": ZERO} if ctx.api_version >= 1 else {}
        auth = getattr(ctx.connection, "auth", None)
        if auth is None or auth.state != "authenticate":
            return Response.of(ctx.correlation_id, build(
                R, error_code=ErrorCode.illegal_sasl_state,
                error_message="SaslAuthenticate request received after successful authentication",
                auth_bytes=b"", **lifetime_field))
        try:
            token, lifetime_ms = auth.authenticate(bytes(req.auth_bytes))
        except AuthenticationFailed as e:
            _failed(ctx, e, auth.mechanism)
            return _closing(ctx, Response.of(ctx.correlation_id, build(
                R, error_code=e.error_code, error_message=e.message, auth_bytes=b"",
                **lifetime_field)), e)
        if auth.authenticated:
            authenticated(ctx.connection, auth, lifetime_ms)
        if ctx.api_version >= 1:
            lifetime_field = {"session_lifetime": datetime.timedelta(milliseconds=lifetime_ms)}
        # Kafka answers a step that went well with an empty message, not a null one
        return Response.of(ctx.correlation_id, build(R, error_code=ErrorCode.none, error_message="",
                                                     auth_bytes=token, **lifetime_field))

    # -- DescribeUserScramCredentials ------------------------------------------------------
    @answers
    def describe_credentials(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Result = nested(R, "DescribeUserScramCredentialsResult")
        Info = nested(R, "CredentialInfo")
        if not self.authz.cluster(ctx, Op.DESCRIBE):
            # DescribeUserScramCredentialsRequest.getErrorResponse: a nameless result per user asked
            refused = ErrorCode.cluster_authorization_failed
            return build(R, throttle_time=ZERO, error_code=refused, error_message=None, results=tuple(
                build(Result, user="", error_code=refused, error_message=None, credential_infos=())
                for _ in req.users or ()))
        names = [u.name for u in req.users] if req.users else self.credentials.users()
        seen: dict[str, bool] = {}
        for name in names:
            seen[name] = name in seen  # True: asked twice
        results = []
        for name, twice in seen.items():
            if twice:
                results.append(build(Result, user=name, error_code=ErrorCode.duplicate_resource,
                                     error_message="Cannot describe SCRAM credentials for the same "
                                                   f"user twice in a single request: {name}",
                                     credential_infos=()))
                continue
            infos = tuple(build(Info, mechanism=TYPE_OF[m], iterations=i)
                          for m, i in self.credentials.described(name))
            if infos:
                results.append(build(Result, user=name, error_code=ErrorCode.none, error_message=None,
                                     credential_infos=infos))
            else:
                results.append(build(Result, user=name, error_code=ErrorCode.resource_not_found,
                                     error_message="Attempt to describe a user credential that "
                                                   f"does not exist: {name}", credential_infos=()))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                     results=tuple(results))

    # -- AlterUserScramCredentials ---------------------------------------------------------
    @answers
    def alter_credentials(self, ctx: RequestContext, req: Any) -> Any:
        from ..security.sasl.scram import MECHANISMS, MIN_ITERATIONS, credential_from_salted
        R = response_cls(ctx)
        Result = nested(R, "AlterUserScramCredentialsResult")
        if not self.authz.cluster(ctx, Op.ALTER):
            # AlterUserScramCredentialsRequest.getErrorResponse: each user named, once, sorted
            named = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
            return build(R, throttle_time=ZERO, results=tuple(
                build(Result, user=n, error_code=ErrorCode.cluster_authorization_failed, error_message=None)
                for n in named))
        errors: dict[str, tuple[int, str]] = {}
        deletions: dict[str, Any] = {}
        upserts: dict[str, Any] = {}
        twice = (ErrorCode.duplicate_resource,
                 "A user credential cannot be altered twice in the same request")

        def invalid(name: str, mechanism: int) -> tuple[int, str] | None:
            if not name:
                return ErrorCode.unacceptable_credential, "Username must not be empty"
            if mechanism not in SCRAM_TYPES:
                return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
            return None

        for d in req.deletions:
            if d.name in errors:
                continue
            if deletions.pop(d.name, None) is not None:
                errors[d.name] = twice
                continue
            error = invalid(d.name, d.mechanism)
            if error is None and not self.credentials.stored.get((d.name, SCRAM_TYPES[d.mechanism])):
                error = (ErrorCode.resource_not_found,
                         "Attempt to delete a user credential that does not exist")
            if error is not None:
                errors[d.name] = error
            else:
                deletions[d.name] = d
        for u in req.upsertions:
            if u.name in errors:
                continue
            if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
                errors[u.name] = twice
                continue
            error = invalid(u.name, u.mechanism)
            if error is None and u.iterations < MIN_ITERATIONS:
                error = (ErrorCode.unacceptable_credential, "Too few iterations")
            elif error is None and u.iterations > MAX_ITERATIONS:
                error = (ErrorCode.unacceptable_credential, "Too many iterations")
            if error is not None:
                errors[u.name] = error
            else:
                upserts[u.name] = u
        results = []
        for name, d in deletions.items():
            self.credentials.delete(name, SCRAM_TYPES[d.mechanism])
            results.append(build(Result, user=name, error_code=ErrorCode.none, error_message=None))
        for name, u in upserts.items():
            mechanism = SCRAM_TYPES[u.mechanism]
            self.credentials.upsert(name, mechanism, credential_from_salted(
                MECHANISMS[mechanism], bytes(u.salted_password), bytes(u.salt), u.iterations))
            results.append(build(Result, user=name, error_code=ErrorCode.none, error_message=None))
        if deletions or upserts:
            self.credentials.save()
        for name, (code, message) in errors.items():
            results.append(build(Result, user=name, error_code=code, error_message=message))
        return build(R, throttle_time=ZERO, results=tuple(results))


def authenticated(conn: Any, auth: Any, lifetime_ms: int) -> None:
    """The connection is now its principal's: lift the pre-authentication bounds."""
    conn.principal = auth.principal
    conn.authenticated(lifetime_ms)
    event = "sasl.reauthenticated" if auth.reauthentications else "sasl.authenticated"
    log.info(event, conn=conn.conn_id, peer=_peer_of(conn), principal=auth.principal,
             mechanism=auth.mechanism, listener=getattr(conn.listener, "name", None),
             session_lifetime_ms=lifetime_ms or None)


def _failed(ctx: RequestContext, e: AuthenticationFailed, mechanism: str | None) -> None:
    # The user the client named and where it came from; never the secret it sent.
    log.warning("sasl.authentication_failed", conn=ctx.connection.conn_id, peer=_peer(ctx),
                listener=getattr(ctx.connection.listener, "name", None), mechanism=mechanism,
                principal=f"User:{e.user}" if e.user else None, error=e.message, reason=e.reason)


def _closing(ctx: RequestContext, response: Response, e: AuthenticationFailed) -> Response:
    ctx.connection.close_after(response, "sasl_authentication_failed")
    return response


def _peer(ctx: RequestContext) -> str | None:
    return _peer_of(ctx.connection)


def _peer_of(conn: Any) -> str | None:
    peer = getattr(conn, "peer", None)
    return f"{peer[0]}:{peer[1]}" if peer else None


def raw_token(conn: Any, frame: Any) -> Response:
    """SaslHandshake v0: a token without a Kafka header, answered the same way; a failure
    closes the connection without an answer (SaslServerAuthenticator, KafkaSaslAuthenticate
    headers off): it raises AuthenticationFailed with ``answer`` False."""
    auth = conn.auth
    try:
        token, lifetime_ms = auth.authenticate(bytes(frame))
    except AuthenticationFailed as e:
        log.warning("sasl.authentication_failed", conn=conn.conn_id, peer=_peer_of(conn),
                    mechanism=auth.mechanism, principal=f"User:{e.user}" if e.user else None,
                    error=e.message, reason=e.reason)
        e.answer = False
        raise
    if auth.authenticated:
        auth.raw_tokens = False
        authenticated(conn, auth, lifetime_ms)
    return Response.encoded((token,), len(token))
