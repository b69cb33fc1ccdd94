"""OAUTHBEARER's server side with Kafka's unsecured-JWS validator, and its refusals; no I/O.

Tokens come from unsecured_token, from a byte-for-byte rebuild of what Kafka's Java client
(OAuthBearerUnsecuredLoginCallbackHandler) and librdkafka (sasl.oauthbearer.config's builtin token,
rdkafka_sasl_oauthbearer.c) send, and from hand-made JSON for each refusal."""

from __future__ import annotations

import base64
import json

import pytest

from minibroker.security.sasl.oauthbearer import (
    GENERIC_FAILURE,
    InvalidTokenError,
    OAuthBearerConfigError,
    OAuthBearerError,
    OAuthBearerServer,
    initial_response,
    parse_unsecured_jws,
    unsecured_token,
)

NOW = 1_700_000_000_123  # ms
HEADER = "eyJhbGciOiJub25lIn0"  # {"alg":"none"}, as librdkafka hard-codes it


def b64url(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jws(claims: dict | str, header: dict | str | None = None, signature: str = "") -> str:
    def enc(part):
        return b64url(part if isinstance(part, str) else json.dumps(part))
    return f"{HEADER if header is None else enc(header)}.{enc(claims)}.{signature}"


def good_claims(**changes):
    claims = {"sub": "alice", "iat": NOW / 1000, "exp": NOW / 1000 + 3600}
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not DROP}


DROP = object()


def authenticate(token: str, server: OAuthBearerServer | None = None, **kw) -> OAuthBearerServer:
    s = server or OAuthBearerServer(NOW)
    assert s.respond(initial_response(token, **kw)) == b""
    return s


# -- accepted tokens -------------------------------------------------------------------------------

def test_an_unsecured_token_authenticates_its_subject():
    s = authenticate(unsecured_token("alice", 3600, NOW))
    assert s.complete and s.state == "done"
    assert s.principal == "alice" and s.token is not None and s.token.principal == "alice"
    assert s.expires_at_ms == NOW + 3_600_000 and s.token.start_time_ms == NOW
    # KIP-368: the session ends with the token, or earlier with connections.max.reauth.ms
    assert s.session_lifetime_ms() == 3_600_000
    assert s.session_lifetime_ms(NOW + 600_000) == 3_000_000
    assert s.session_lifetime_ms(connections_max_reauth_ms=60_000) == 60_000
    assert s.session_lifetime_ms(connections_max_reauth_ms=0) == 3_600_000
    assert s.session_lifetime_ms(NOW + 4_000_000) == 0


def test_librdkafka_builtin_unsecured_token():
    # sasl.oauthbearer.config="principal=alice scope=read,write,read extension_traceId=123":
    # claims {"sub":..,"iat":%.3f,"exp":%.3f} then the de-duplicated scope array; standard base64
    # with the padding stripped and +/ turned into -_; the message n,,^Aauth=Bearer ..^A ext^A ^A
    now_s = NOW / 1000.0
    claims = f'{{"sub":"alice","iat":{now_s:.3f},"exp":{now_s + 3600:.3f},"scope":["read","write"]}}'
    assert claims == '{"sub":"alice","iat":1700000000.123,"exp":1700003600.123,"scope":["read","write"]}'
    encoded = base64.b64encode(claims.encode()).decode().rstrip("=").replace("+", "-").replace("/", "_")
    token = f"{HEADER}.{encoded}."
    message = f"n,,\x01auth=Bearer {token}\x01traceId=123\x01\x01".encode()
    s = OAuthBearerServer(NOW, {"unsecuredValidatorRequiredScope": "write"})
    assert s.respond(message) == b""
    assert s.principal == "alice" and s.extensions == {"traceId": "123"}
    assert s.token is not None and s.token.scope == {"read", "write"}
    assert s.expires_at_ms == NOW + 3_600_000


def test_librdkafka_token_with_another_principal_claim():
    # principalClaimName=azp principal=svc; the broker needs unsecuredValidatorPrincipalClaimName=azp
    now_s = NOW / 1000.0
    claims = f'{{"azp":"svc","iat":{now_s:.3f},"exp":{now_s + 600:.3f}}}'
    token = f"{HEADER}.{b64url(claims)}."
    s = authenticate(token, OAuthBearerServer(NOW, {"unsecuredValidatorPrincipalClaimName": " azp "}))
    assert s.principal == "svc"
    s = OAuthBearerServer(NOW)
    assert s.respond(initial_response(token)) == b'{"status":"invalid_token"}'
    assert s.failure_reason == "No principal name in JWT claim: sub"


def test_java_client_unsecured_token():
    # OAuthBearerUnsecuredLoginCallbackHandler: exp and iat are Java doubles (Double.toString:
    # 1.700003600123E9), "unsecuredLoginListClaim_scope" a list; OAuthBearerClientInitialResponse
    # .toBytes: n,a=alice,^Aauth=Bearer ..^AtraceId=123^A^A
    claims = '{"exp":1.700003600123E9,"iat":1.700000000123E9,"sub":"alice","scope":["read"]}'
    token = b64url('{"alg":"none"}') + "." + b64url(claims) + "."
    message = f"n,a=alice,\x01auth=Bearer {token}\x01traceId=123\x01\x01".encode()
    s = OAuthBearerServer(NOW)
    assert s.respond(message) == b""
    assert (s.principal, s.expires_at_ms, s.extensions) == ("alice", NOW + 3_600_000, {"traceId": "123"})


def test_unsecured_token_helper():
    token = unsecured_token("bob", 60, NOW, scope="read  write")
    header, claims, signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert json.loads(base64.urlsafe_b64decode(claims + "==")) == {
        "exp": NOW / 1000 + 60, "iat": NOW / 1000, "sub": "bob", "scope": ["read", "write"]}
    assert signature == "" and "=" not in token
    assert parse_unsecured_jws(token).scope == {"read", "write"}


def test_iat_is_optional_and_integers_do():
    s = authenticate(jws({"sub": "alice", "exp": NOW // 1000 + 10}))
    assert s.token is not None and s.token.start_time_ms is None
    assert s.expires_at_ms == (NOW // 1000 + 10) * 1000


def test_base64url_alphabet_and_padding():
    # "?>" at the right offsets encode to "_" and "-": refused by Kafka up to 4.0 (KAFKA-17089,
    # fixed in 4.1 with the URL decoder), accepted here as there
    claims = good_claims(note="??>>??>>")
    token = jws(claims)
    assert "_" in token.split(".")[1] or "-" in token.split(".")[1]
    authenticate(token)
    # padding: the auth regex allows "=" only at the token's end, in the signature part
    padded = base64.urlsafe_b64encode(json.dumps(good_claims(x="ab")).encode()).decode()
    assert padded.endswith("=")
    with pytest.raises(OAuthBearerError, match=GENERIC_FAILURE):
        OAuthBearerServer(NOW).respond(initial_response(f"{HEADER}.{padded}."))


def test_the_clock_is_read_when_the_token_arrives():
    times = iter([NOW + 3_600_000, NOW])
    s = OAuthBearerServer(lambda: next(times))
    token = unsecured_token("alice", 3600, NOW)
    assert s.respond(initial_response(token)) == b'{"status":"invalid_token"}'
    assert s.respond(initial_response(token)) == b""  # a retry after the challenge, a new reading


def test_allowable_clock_skew():
    token = unsecured_token("alice", 10, NOW)
    expiry = NOW + 10_000
    assert OAuthBearerServer(expiry - 1).respond(initial_response(token)) == b""
    assert OAuthBearerServer(expiry).respond(initial_response(token)).startswith(b'{"status"')
    skewed = OAuthBearerServer(expiry + 999, {"unsecuredValidatorAllowableClockSkewMs": "1000"})
    assert skewed.respond(initial_response(token)) == b""
    # and iat up to the skew in the future
    early = OAuthBearerServer(NOW - 500, {"unsecuredValidatorAllowableClockSkewMs": 500})
    assert early.respond(initial_response(token)) == b""


# -- refused tokens: a JSON challenge first, the failure after the client's kvsep ------------------

REFUSED = [
    ("not.three", "3 dot-separated"),
    (f"{HEADER}..", "contains '..'"),
    (f"{HEADER}.e30.x.y", "3 dot-separated"),
    ("~~~." + b64url(json.dumps(good_claims())) + ".", "malformed Base64 URL encoded value"),
    (f"{HEADER}.{b64url('{')}.", "malformed JSON"),
    (HEADER + "." + b64url('{"exp": NaN}') + ".", "malformed JSON"),
    (HEADER + "." + b64url(b"\xff\xfe") + ".", "malformed JSON"),
    (f"{HEADER}.A.", "malformed Base64 URL encoded value"),  # one character: no byte
    (f"{HEADER}.e3+0.", "malformed Base64 URL encoded value"),  # standard alphabet
    (jws(good_claims(), {"alg": "HS256"}), "must have 'none' for an algorithm"),
    (jws(good_claims(), {"alg": None}), "must have 'none' for an algorithm"),  # null is "null"
    (jws(good_claims(), signature="c2ln"), "must not contain a digital signature"),
    (jws(good_claims(sub=DROP)), "No principal name in JWT claim: sub"),
    (jws(good_claims(sub=" \t")), "No principal name in JWT claim: sub"),
    (jws(good_claims(sub={})), "No principal name in JWT claim: sub"),  # an object's text is ""
    (jws(good_claims(sub=7)), "The 'sub' claim was not of type String: Integer"),
    (jws(good_claims(sub=["alice"])), "The 'sub' claim was not of type String: ArrayList"),
    (jws(good_claims(exp=DROP)), "No expiration time in JWT"),
    (jws(good_claims(exp=str(NOW // 1000 + 60))), "The 'exp' claim was not of type Number: String"),
    (jws(good_claims(exp=None)), "The 'exp' claim was not of type Number: String"),
    (jws(good_claims(iat="now")), "The 'iat' claim was not of type Number: String"),
    (jws(good_claims(scope=5)), "The 'scope' claim was not of type List: Integer"),
    (jws(good_claims(scope=2 ** 40)), "The 'scope' claim was not of type List: Long"),
    (jws(good_claims(exp=NOW / 1000)), f"The indicated time ({NOW} ms) minus allowable clock skew "
                                       f"(0 ms) was on or after the Expiration Time value "
                                       f"({NOW / 1000:f} seconds)"),
    (unsecured_token("alice", 3600, NOW - 3_600_000), "was on or after the Expiration Time"),
    (jws(good_claims(iat=NOW / 1000 + 1)), "The Issued At value"),
    (jws(good_claims(iat=NOW / 1000 - 10, exp=NOW / 1000 - 20)), "on or after the Expiration Time"),
    (jws({"sub": "alice", "iat": NOW // 1000 - 5, "exp": NOW // 1000 - 5}), "on or after"),
    (jws("[1, 2]"), "No expiration time in JWT"),  # not an object: no claims
]


@pytest.mark.parametrize("token, reason", REFUSED)
def test_a_refused_token_gets_the_challenge_then_the_failure(token, reason):
    s = OAuthBearerServer(NOW)
    challenge = s.respond(initial_response(token))
    assert challenge == b'{"status":"invalid_token"}'
    assert not s.complete and s.state == "error_sent" and s.principal is None
    assert reason in (s.failure_reason or "")
    with pytest.raises(OAuthBearerError) as e:
        s.respond(b"\x01")
    # SaslAuthenticationException(errorMessage): the JSON itself is the client's error message
    assert str(e.value) == '{"status":"invalid_token"}' and not e.value.generic and e.value.answered
    with pytest.raises(OAuthBearerError):
        s.respond(b"\x01")  # nothing after a failure


def test_times_must_be_consistent():
    # exp not after iat, both within the clock skew of now: only the consistency check refuses it
    s = OAuthBearerServer(NOW, {"unsecuredValidatorAllowableClockSkewMs": "1000"})
    claims = {"sub": "alice", "iat": (NOW + 500) / 1000, "exp": (NOW + 400) / 1000}
    assert s.respond(initial_response(jws(claims))) == b'{"status":"invalid_token"}'
    assert s.failure_reason == ("The Expiration Time time (1700000000.523000 seconds) was not after the "
                                "Issued At time (1700000000.623000 seconds)")


def test_required_scope():
    options = {"unsecuredValidatorRequiredScope": " read  write "}
    ok = unsecured_token("alice", 3600, NOW, scope=["write", " read ", ""])
    assert authenticate(ok, OAuthBearerServer(NOW, options)).principal == "alice"
    for token in [unsecured_token("alice", 3600, NOW, scope=["read"]),
                  unsecured_token("alice", 3600, NOW),
                  # a string claim is one element, "read write", in Kafka: not split
                  jws(good_claims(scope="read write"))]:
        s = OAuthBearerServer(NOW, options)
        assert s.respond(initial_response(token)) == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
        assert "was missing a required scope" in (s.failure_reason or "")
        with pytest.raises(OAuthBearerError, match=r'^\{"status":"insufficient_scope", "scope":"\[read, write\]"\}$'):
            s.respond(b"\x01")
    single = OAuthBearerServer(NOW, {"unsecuredValidatorRequiredScope": "read"})
    assert single.respond(initial_response(jws(good_claims(scope=" read ")))) == b""


def test_a_retry_after_the_challenge():
    s = OAuthBearerServer(NOW)
    assert s.respond(initial_response(unsecured_token("alice", 1, NOW - 5000))).startswith(b"{")
    assert s.respond(initial_response(unsecured_token("alice", 60, NOW))) == b""
    assert s.principal == "alice" and s.failure_reason is None


# -- refusals without the challenge ------------------------------------------------------------

def test_authorization_id():
    token = unsecured_token("alice", 3600, NOW)
    assert authenticate(token, authorization_id="alice").principal == "alice"
    s = OAuthBearerServer(NOW)
    with pytest.raises(OAuthBearerError) as e:
        s.respond(initial_response(token, authorization_id="bob"))
    assert str(e.value) == ("Authentication failed: Client requested an authorization id (bob) that is "
                            "different from the token's principal name (alice)")
    assert not e.value.generic and e.value.answered and not s.complete
    with pytest.raises(OAuthBearerError):
        s.respond(b"\x01")  # no challenge was sent: nothing more


TOKEN = unsecured_token("alice", 3600, NOW)


@pytest.mark.parametrize("message, reason", [
    (b"", "Invalid OAUTHBEARER client first message"),
    (b"\x01", "Invalid OAUTHBEARER client first message"),  # a kvsep without a challenge before it
    (f"y,,\x01auth=Bearer {TOKEN}\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,a=,\x01auth=Bearer {TOKEN}\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,,\x01auth=Bearer {TOKEN}\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,,auth=Bearer {TOKEN}\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,,\x01auth=Bearer {TOKEN}\x01trace_id=1\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,,\x01auth=Bearer {TOKEN}\x01a1=x\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,,\x01auth=Bearer {TOKEN}\x01empty=\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,,\x01auth=Bearer {TOKEN}\x01k=caf\u00e9\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer \xff\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (f"n,,\x01AUTH=Bearer {TOKEN}\x01\x01".encode(), "'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (f"n,,\x01auth=Bearer {TOKEN} \x01\x01".encode(), "invalid 'auth' format"),
    (f"n,,\x01auth=Bearer {TOKEN[:5]}*{TOKEN[5:]}\x01\x01".encode(), "invalid 'auth' format"),
])
def test_malformed_messages_get_kafkas_generic_failure(message, reason):
    # SaslException: SaslServerAuthenticator sends its generic message, not the reason
    s = OAuthBearerServer(NOW)
    with pytest.raises(OAuthBearerError) as e:
        s.respond(message)
    assert str(e.value) == GENERIC_FAILURE and e.value.generic and e.value.answered
    assert reason in e.value.reason
    assert s.state == "failed"


def test_kafka_drops_the_connection_on_a_non_bearer_scheme_and_a_header_without_alg():
    for message, reason in [
        (f"n,,\x01auth=Basic {TOKEN}\x01\x01".encode(), "No group with name <scheme>"),
        (initial_response(jws(good_claims(), {"typ": "JWT"})), "JWS header must have an Algorithm value"),
        (initial_response(jws(good_claims(), "[]")), "JWS header must have an Algorithm value"),
    ]:
        with pytest.raises(OAuthBearerError) as e:
            OAuthBearerServer(NOW).respond(message)
        assert not e.value.answered and e.value.reason == reason


def test_nothing_after_success():
    s = authenticate(TOKEN)
    with pytest.raises(OAuthBearerError):
        s.respond(initial_response(TOKEN))


# -- the message's syntax ----------------------------------------------------------------------

def test_extensions_authzid_and_scheme_case():
    message = (f"n,a=alice,\x01traceId=a=b c\x01auth=bEaReR   {TOKEN}\x01x=1\x01x=2\x01\x01").encode()
    s = OAuthBearerServer(NOW)
    assert s.respond(message) == b""
    assert s.extensions == {"traceId": "a=b c", "x": "2"}  # a repeated key: the last one
    # "auth" twice: the last is the token
    twice = f"n,,\x01auth=Bearer nonsense\x01auth=Bearer {TOKEN}\x01\x01".encode()
    assert OAuthBearerServer(NOW).respond(twice) == b""


def test_the_authzid_is_compared_undecoded():
    token = unsecured_token("a,b", 3600, NOW)
    with pytest.raises(OAuthBearerError, match="authorization id"):
        OAuthBearerServer(NOW).respond(initial_response(token, authorization_id="a=2Cb"))


def test_jackson_conversions():
    # true -> "true", a trailing value after the object ignored, a non-object header has no alg
    claims = json.dumps(good_claims(sub=True)) + " trailing"
    s = authenticate(f"{HEADER}.{b64url(claims)}.")
    assert s.principal == "true"
    numbers = parse_unsecured_jws(jws(good_claims(scope=[1, 2.5, 1e20, None, "x", ["y"]])))
    assert numbers.scope == {"1", "2.5", "1.0E20", "null", "x"}


# -- options -----------------------------------------------------------------------------------

@pytest.mark.parametrize("options, message", [
    ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "Allowable clock skew millis must not be negative: -1"),
    ({"unsecuredValidatorAllowableClockSkewMs": "1.5"}, 'For input string: "1.5"'),
    ({"unsecuredValidatorAllowableClockSkewMs": "99999999999"}, 'For input string: "99999999999"'),
    ({"unsecuredValidatorRequiredScope": 'read "write"'}, 'Invalid scope value: "write"'),
    ({"unsecuredValidatorRequiredScope": "a\\b"}, "Invalid scope value: a\\b"),
])
def test_bad_options(options, message):
    with pytest.raises(OAuthBearerConfigError) as e:
        OAuthBearerServer(NOW, options)
    assert str(e.value) == message


def test_blank_options_take_the_defaults():
    s = OAuthBearerServer(NOW, {"unsecuredValidatorPrincipalClaimName": "  ",
                                "unsecuredValidatorAllowableClockSkewMs": " ",
                                "unsecuredValidatorRequiredScope": ""})
    assert (s.principal_claim_name, s.scope_claim_name, s.required_scope, s.allowable_clock_skew_ms) == (
        "sub", "scope", (), 0)


def test_invalid_token_error_carries_the_failure_scope():
    with pytest.raises(InvalidTokenError) as e:
        parse_unsecured_jws("a.b")
    assert e.value.scope is None
