"""Delegation tokens with real clients on minibroker: the Java Admin 4.4 (create, describe, renew,
expire), a Java producer and consumer logging in with the token (ScramLoginModule with
tokenauth="true"), and Kafka's own kafka-delegation-tokens.sh (DelegationTokenCommand from the
cached kafka-tools jar). librdkafka has no token login (it sends no SCRAM extensions), so
confluent-kafka is not among them."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.integration import java_client
from tests.integration.support import free_port
from tests.reference.kafka import libs_dir

SECRET = "java-token-secret"


@pytest.fixture
def token_broker(broker_factory, tmp_path):
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\nbob:bob-secret\n")
    listeners = f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}"
    return broker_factory(listeners=listeners, sasl_users=users, delegation_token_secret_key=SECRET)


def test_java_admin_and_clients_logging_in_with_a_token(token_broker, topic):
    plain, sasl = token_broker.addresses
    run = java_client.json_driver("DelegationTokens", timeout=150)
    got = run(sasl, "alice", "alice-secret", topic)
    token_id = got["token_id"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", token_id)
    assert (got["owner"], got["requester"], got["renewers"]) == ("User:alice", "User:alice", "[User:bob]")
    assert (got["lifetime_ms"], got["max_lifetime_ms"]) == (86_400_000, 604_800_000)
    assert got["described"] == [token_id] and got["renewed_for_ms"] == 60_000
    # the token's session is alice's: it produced and read back
    assert got["consumed"] == ["via-token-0", "via-token-1", "via-token-2"]
    # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a token session (the Java client's exception for it)
    assert got["create_with_token"] == "UnsupportedByAuthenticationException"
    assert got["described_after_expire"] == []
    assert got["login_after_expire"] == "SaslAuthenticationException"


def _tool(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    java = java_client.java_toolchain().java
    libs = libs_dir()
    if not list(libs.glob("kafka-tools-*.jar")):
        java_client._unavailable(f"kafka-tools jar not in {libs} (python -m tests.reference.kafka fetch)")
    return subprocess.run([java, "-Xmx256m", "-cp", f"{libs}/*", "org.apache.kafka.tools.DelegationTokenCommand",
                           *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_kafka_delegation_tokens_sh(token_broker, tmp_path):
    _, sasl = token_broker.addresses
    config = tmp_path / "alice.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'username="alice" password="alice-secret";\n')
    common = ["--bootstrap-server", sasl, "--command-config", str(config)]
    r = _tool(*common, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"Created delegation token with tokenId : (\S+)", r.stdout)
    assert m, r.stdout
    token_id = m.group(1)
    row = next(line for line in r.stdout.splitlines() if line.startswith(token_id))
    hmac = row.split()[1]
    assert "User:alice" in row and "[User:bob]" in row
    # without --owner-principal the tool sends an empty owner list, which Kafka 4.4 answers with no
    # token (KafkaApis: ownersListEmpty; compared in tests/differential/test_delegation_tokens.py)
    r = _tool(*common, "--describe")
    assert r.returncode == 0 and "Total number of tokens : 0" in r.stdout, r.stdout + r.stderr
    r = _tool(*common, "--describe", "--owner-principal", "User:alice")
    assert r.returncode == 0 and token_id in r.stdout and "User:alice" in r.stdout, r.stdout + r.stderr
    r = _tool(*common, "--describe", "--owner-principal", "User:bob")  # bob renews it
    assert r.returncode == 0 and token_id in r.stdout, r.stdout + r.stderr
    r = _tool(*common, "--describe", "--owner-principal", "User:carol")
    assert r.returncode == 0 and token_id not in r.stdout, r.stdout + r.stderr
    r = _tool(*common, "--renew", "--hmac", hmac, "--renew-time-period", "60000")
    assert r.returncode == 0 and "Completed renew operation" in r.stdout, r.stdout + r.stderr
    r = _tool(*common, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert r.returncode == 0 and "Completed expire operation" in r.stdout, r.stdout + r.stderr
    r = _tool(*common, "--describe", "--owner-principal", "User:alice")
    assert r.returncode == 0 and "Total number of tokens : 0" in r.stdout, r.stdout + r.stderr
    # a renewal of a token that is gone: Kafka's error, one line, no stack trace of the broker's
    r = _tool(*common, "--renew", "--hmac", hmac, "--renew-time-period", "60000")
    assert r.returncode != 0 and "DelegationTokenNotFoundException" in r.stdout + r.stderr


def test_java_reauthenticates_a_token_session_while_the_token_is_renewed(broker_factory, tmp_path, topic):
    """Tokens that expire 4 s after each renewal: the session a token login gets lasts what is left
    of the token (KIP-368), so the Java producer re-authenticates on its open connection while the
    token is renewed every second; once renewals stop the token expires, is swept (every 500 ms),
    and the producer's next login is refused."""
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\n")
    b = broker_factory(listeners=f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                       sasl_users=users, delegation_token_secret_key=SECRET,
                       delegation_token_expiry_time_ms=4000, delegation_token_expiry_check_interval_ms=500)
    run = java_client.json_driver("DelegationTokenReauth", timeout=120)
    got = run(b.addresses[1], "alice", "alice-secret", topic, "12")
    assert got["sent"] >= 10, got  # one every 250 ms, renewed meanwhile (bounded below for a loaded machine)
    # the producer's batch times out while its logins are refused (the Java producer reports a
    # node it cannot authenticate to so: its metadata is cached, its batch waits for the node)
    assert got["after_expiry"] in ("SaslAuthenticationException", "TimeoutException"), got
    log = b.log_path.read_text()
    reauths = [line for line in log.splitlines()
               if "sasl.reauthenticated" in line and "SCRAM-SHA-256" in line and "principal=User:alice" in line]
    assert len(reauths) >= 2, log[-3000:]
    swept = next(i for i, line in enumerate(log.splitlines()) if "token.expired" in line and "past_expiry" in line)
    refused = [line for line in log.splitlines()[swept:] if "sasl.authentication_failed" in line]
    assert refused and all("SCRAM-SHA-256" in line for line in refused), log[-3000:]
