"""Delegation tokens (KIP-48), sans-io apart from their one file: create, renew, expire, describe,
the expiry sweep, and the SCRAM credential a token logs in with.

Kafka 4.4 keeps tokens in the KRaft metadata log (DelegationTokenControlManager on the controller,
metadata/src/main/java/org/apache/kafka/controller/DelegationTokenControlManager.java; the
broker's DelegationTokenCache fed by DelegationTokenPublisher). Here they live in
``delegation-tokens.json`` in the data dir, rewritten on every change, without their HMACs: as
in Kafka's DelegationTokenRecord, the HMAC is HmacSHA512(secret key, token id) and is computed
again on load, so tokens made under another ``delegation.token.secret.key`` no longer log in.

The rules, each as DelegationTokenControlManager has them:

- create: max timestamp = now + min(delegation.token.max.lifetime.ms, the request's max lifetime
  when > 0); expiry = min(max, now + delegation.token.expiry.time.ms); renewers must be User
  principals (INVALID_PRINCIPAL_TYPE);
- renew: unknown HMAC -> NOT_FOUND; past its max or expiry -> EXPIRED; caller neither owner nor
  renewer -> OWNER_MISMATCH; else expiry = min(max, now + min(default, the asked period when > 0));
- expire: NOT_FOUND, OWNER_MISMATCH as renew (in that order); a negative period removes the
  token at once; an already expired token -> EXPIRED; else expiry = min(max, now + period);
- the sweep (the controller's periodic task, delegation.token.expiry.check.interval.ms) removes
  tokens past their max or expiry. Until it runs an expired token is still described and is
  answered EXPIRED rather than NOT_FOUND, as in Kafka.

A token logs in with SCRAM and the ``tokenauth=true`` extension: the user name is the token id,
the password the HMAC in base64 (ScramServerCallbackHandler, DelegationTokenManager.
prepareScramCredentials: a credential per SCRAM mechanism at its minimum iterations).
"""

from __future__ import annotations

import base64
import hashlib
import hmac as hmac_mod
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from minibroker_protocol.errors import ErrorCode
from minibroker_storage.atomic_file import write_atomically
from minibroker_storage.lazylog import get_logger

from .sasl.scram import MIN_ITERATIONS, ScramCredential, make_credential

log = get_logger("minibroker.tokens")

FILE_NAME = "delegation-tokens.json"
INT64_MAX = 2**63 - 1
USER_TYPE = "User"


def _sum(now: int, duration: int) -> int:
    # DelegationTokenControlManager.sum: saturate instead of overflowing
    return INT64_MAX if now > INT64_MAX - duration else now + duration


def new_token_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes in URL-safe base64 without padding,
    never all zeros nor starting with '-' (Uuid.randomUuid loops past those)."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if any(raw) and not text.startswith("-") and raw != bytes(15) + b"\x01":
            return text


def principal_text(ptype: str, name: str) -> str:
    return f"{ptype}:{name}"


@dataclass(frozen=True)
class Token:
    token_id: str
    owner: tuple[str, str]          # (principal type, name)
    requester: tuple[str, str]
    renewers: tuple[tuple[str, str], ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int
    hmac: bytes = field(repr=False, default=b"")

    def owner_or_renewer(self, principal: tuple[str, str]) -> bool:
        # TokenInformation.ownerOrRenewer; KafkaPrincipal.equals compares type and name only
        return principal == self.owner or principal in self.renewers

    def expired(self, now: int) -> bool:
        return self.max_ms < now or self.expiry_ms < now


@dataclass(frozen=True)
class Outcome:
    error: int
    token: Token | None = None
    expiry_ms: int = 0


def split_principal(text: str) -> tuple[str, str]:
    """"User:alice" -> ("User", "alice") (SecurityUtils.parseKafkaPrincipal)."""
    ptype, _, name = text.partition(":")
    return ptype, name


class DelegationTokens:
    """The tokens of one broker. ``secret_key`` None: delegation tokens are off (every API answers
    DELEGATION_TOKEN_AUTH_DISABLED, no token logs in). ``now_ms``: the broker's clock."""

    def __init__(self, secret_key: str | None, now_ms: Callable[[], int], *,
                 max_lifetime_ms: int = 604_800_000, expiry_time_ms: int = 86_400_000,
                 data_dir: Path | None = None) -> None:
        self.secret_key = secret_key or None
        self.now_ms = now_ms
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self.tokens: dict[str, Token] = {}
        self._by_hmac: dict[bytes, str] = {}
        # (token id, mechanism) -> credential, made on the first login with the token
        self._credentials: dict[tuple[str, str], ScramCredential] = {}
        if self.enabled and self.path is not None and self.path.exists():
            self._load()

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None

    def _hmac(self, token_id: str) -> bytes:
        assert self.secret_key is not None
        return hmac_mod.new(self.secret_key.encode(), token_id.encode(), hashlib.sha512).digest()

    # -- the four APIs --------------------------------------------------------------------
    def create(self, owner: tuple[str, str], requester: tuple[str, str],
               renewers: list[tuple[str, str]], max_lifetime_ms: int) -> Outcome:
        if not self.enabled:
            return Outcome(ErrorCode.delegation_token_auth_disabled)
        now = self.now_ms()
        max_life = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            max_life = min(max_life, max_lifetime_ms)
        max_ms = _sum(now, max_life)
        expiry_ms = min(max_ms, _sum(now, self.expiry_time_ms))
        if any(r[0] != USER_TYPE for r in renewers):
            return Outcome(ErrorCode.invalid_principal_type)
        token_id = new_token_id()
        token = Token(token_id, owner, requester, tuple(renewers), now, max_ms, expiry_ms,
                      self._hmac(token_id))
        self._put(token)
        self.save()
        log.info("token.created", token_id=token_id, owner=principal_text(*owner),
                 requester=principal_text(*requester), expiry_ms=expiry_ms, max_ms=max_ms)
        return Outcome(ErrorCode.none, token, expiry_ms)

    def renew(self, principal: tuple[str, str], hmac: bytes, renew_period_ms: int) -> Outcome:
        if not self.enabled:
            return Outcome(ErrorCode.delegation_token_auth_disabled)
        now = self.now_ms()
        token = self.by_hmac(hmac)
        if token is None:
            return Outcome(ErrorCode.delegation_token_not_found)
        if token.expired(now):
            return Outcome(ErrorCode.delegation_token_expired)
        if not token.owner_or_renewer(principal):
            return Outcome(ErrorCode.delegation_token_owner_mismatch)
        period = self.expiry_time_ms
        if renew_period_ms > 0:
            period = min(period, renew_period_ms)
        expiry_ms = min(token.max_ms, now + period)
        self._put(replace(token, expiry_ms=expiry_ms))
        self.save()
        log.info("token.renewed", token_id=token.token_id, principal=principal_text(*principal),
                 expiry_ms=expiry_ms)
        return Outcome(ErrorCode.none, token, expiry_ms)

    def expire(self, principal: tuple[str, str], hmac: bytes, period_ms: int) -> Outcome:
        if not self.enabled:
            return Outcome(ErrorCode.delegation_token_auth_disabled)
        now = self.now_ms()
        token = self.by_hmac(hmac)
        if token is None:
            return Outcome(ErrorCode.delegation_token_not_found)
        if not token.owner_or_renewer(principal):
            return Outcome(ErrorCode.delegation_token_owner_mismatch)
        if period_ms < 0:
            self._remove(token.token_id)
            self.save()
            log.info("token.expired", token_id=token.token_id,
                     principal=principal_text(*principal), reason="expire_request")
            return Outcome(ErrorCode.none, token, now)
        if token.expired(now):
            return Outcome(ErrorCode.delegation_token_expired)
        expiry_ms = min(token.max_ms, _sum(now, period_ms))
        self._put(replace(token, expiry_ms=expiry_ms))
        self.save()
        log.info("token.expiry_changed", token_id=token.token_id,
                 principal=principal_text(*principal), expiry_ms=expiry_ms)
        return Outcome(ErrorCode.none, token, expiry_ms)

    def all(self) -> list[Token]:
        return list(self.tokens.values())

    def by_hmac(self, hmac: bytes) -> Token | None:
        token_id = self._by_hmac.get(bytes(hmac))
        return self.tokens.get(token_id) if token_id is not None else None

    # -- the sweep ------------------------------------------------------------------------
    def sweep(self, now: int | None = None) -> int:
        """Remove the tokens past their max or expiry timestamp; how many went."""
        now = self.now_ms() if now is None else now
        gone = [t for t in self.tokens.values() if t.expired(now)]
        for t in gone:
            self._remove(t.token_id)
            log.info("token.expired", token_id=t.token_id, owner=principal_text(*t.owner),
                     reason="past_expiry")
        if gone:
            self.save()
        return len(gone)

    # -- logging in with a token ----------------------------------------------------------
    def scram(self, token_id: str, mechanism: str) -> tuple[ScramCredential, Token] | None:
        """The SCRAM credential the token logs in with under ``mechanism``, and the token; None
        for a token id that is not (or no longer) known. An expired token not swept yet still
        logs in, as in Kafka; its session ends at once (its lifetime is its expiry)."""
        token = self.tokens.get(token_id)
        if token is None:
            return None
        key = (token_id, mechanism)
        credential = self._credentials.get(key)
        if credential is None:
            password = base64.b64encode(token.hmac).decode()
            credential = self._credentials[key] = make_credential(mechanism, password, MIN_ITERATIONS)
        return credential, token

    # -- state ----------------------------------------------------------------------------
    def _put(self, token: Token) -> None:
        self.tokens[token.token_id] = token
        self._by_hmac[token.hmac] = token.token_id

    def _remove(self, token_id: str) -> None:
        token = self.tokens.pop(token_id, None)
        if token is not None:
            self._by_hmac.pop(token.hmac, None)
        for key in [k for k in self._credentials if k[0] == token_id]:
            del self._credentials[key]

    def save(self) -> None:
        if self.path is None:
            return
        doc = [{"token_id": t.token_id, "owner": list(t.owner), "requester": list(t.requester),
                "renewers": [list(r) for r in t.renewers], "issue_ms": t.issue_ms,
                "max_ms": t.max_ms, "expiry_ms": t.expiry_ms}
               for t in sorted(self.tokens.values(), key=lambda t: (t.issue_ms, t.token_id))]
        write_atomically(self.path, json.dumps(doc, indent=1) + "\n", sync_dir=True)

    def _load(self) -> None:
        assert self.path is not None
        try:
            doc = json.loads(self.path.read_text())
            tokens = [Token(e["token_id"], _pair(e["owner"]), _pair(e["requester"]),
                            tuple(_pair(r) for r in e["renewers"]), int(e["issue_ms"]),
                            int(e["max_ms"]), int(e["expiry_ms"]), self._hmac(e["token_id"]))
                      for e in doc]
        except (OSError, ValueError, KeyError, TypeError) as e:
            # A damaged file must not stop the broker: its tokens are gone (their owners make
            # new ones), and the operator is told why.
            log.error("token.file_unreadable", file=str(self.path), error=str(e),
                      reason="delegation tokens made before are ignored")
            return
        for t in tokens:
            self._put(t)
        log.info("token.loaded", tokens=len(tokens))


def _pair(v: object) -> tuple[str, str]:
    if not isinstance(v, list) or len(v) != 2 or not all(isinstance(x, str) for x in v):
        raise ValueError(f"not a principal: {v!r}")
    return v[0], v[1]
