"""Parsing of --listeners / --advertised-listeners the way Kafka's KafkaConfig reads them."""

import pytest

from minibroker.config.listeners import Listener, ListenerError, parse_endpoints, resolve
from minibroker.config.options import add_serve_options, config_from_args


def _resolve(listeners, advertised=None):
    return resolve(listeners, advertised, host="127.0.0.1", port=9092,
                   advertised_host=None, advertised_port=None)


def test_shorthand_is_one_plaintext_listener():
    assert resolve(None, None, host="0.0.0.0", port=9092, advertised_host=None,
                   advertised_port=None) == (Listener("PLAINTEXT", "0.0.0.0", 9092),)
    only = resolve(None, None, host="0.0.0.0", port=0, advertised_host="broker",
                   advertised_port=19092)[0]
    assert only.advertised(40000) == ("broker", 19092)


def test_compose_pair():
    got = _resolve("INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092",
                   "INTERNAL://minibroker:29092,EXTERNAL://localhost:9092")
    assert [(x.name, x.host, x.port) for x in got] == [
        ("INTERNAL", "0.0.0.0", 29092), ("EXTERNAL", "0.0.0.0", 9092)]
    assert got[0].advertised(29092) == ("minibroker", 29092)
    assert got[1].advertised(9092) == ("localhost", 9092)


def test_defaults_for_listeners_not_advertised():
    a, b, c = _resolve("A://:0,B://127.0.0.2:9000,C://[::1]:9001")
    assert a.advertised(41000) == ("localhost", 41000)  # every interface: tell clients localhost
    assert b.advertised(9000) == ("127.0.0.2", 9000)
    assert c.host == "::1" and c.advertised(9001) == ("::1", 9001)


def test_advertised_port_zero_means_bound_port():
    (x,) = _resolve("PLAINTEXT://127.0.0.1:0", "PLAINTEXT://localhost:0")
    assert x.advertised(41234) == ("localhost", 41234)


def test_names_are_case_insensitive():
    (x,) = _resolve("plaintext://127.0.0.1:0", "PlainText://h:1")
    assert x.name == "PLAINTEXT" and x.advertised(5) == ("h", 1)


@pytest.mark.parametrize("listeners, advertised, message", [
    ("127.0.0.1:9092", None, "NAME://host:port"),
    ("A://127.0.0.1", None, "no port"),
    ("A://127.0.0.1:x", None, "non-numeric"),
    ("A://127.0.0.1:70000", None, "out of range"),
    ("A://:9092,A://:9093", None, "appears twice"),
    ("A://:9092,B://127.0.0.1:9092", None, "own port"),
    ("A://127.0.0.1:9092,B://127.0.0.2:9092", None, "own port"),
    ("A://127.0.0.1:9092,B://[::1]:9092,C://[::2]:9092", None, "own port"),
    ("A://127.0.0.1:+12", None, "non-numeric"),
    ("A://:9092", "B://h:1", "does not define"),
    ("A://:9092", "A://0.0.0.0:9092", "not an address"),
    ("", None, None),  # empty: the shorthand
    (" , ", None, "no listener"),
    ("[::1:9092", None, "NAME://host:port"),
    ("A://[::1:9092", None, "IPv6"),
])
def test_refused_lists(listeners, advertised, message):
    if message is None:
        assert len(_resolve(listeners, advertised)) == 1
        return
    with pytest.raises(ListenerError, match=message.replace("/", ".")):
        _resolve(listeners, advertised)


def test_one_ipv4_and_one_ipv6_may_share_a_port():
    # Kafka's SocketServerConfigs.LISTENERS_DOC: PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092
    got = _resolve("A://127.0.0.1:9092,B://[::1]:9092")
    assert [x.port for x in got] == [9092, 9092]


def test_advertised_shorthand_with_listeners_is_refused():
    with pytest.raises(ListenerError, match="--advertised-listeners"):
        resolve("A://:9092", None, host="0.0.0.0", port=9092, advertised_host="h",
                advertised_port=None)


def test_advertised_without_listeners_is_refused():
    with pytest.raises(ListenerError, match="needs --listeners"):
        _resolve(None, "A://h:1")


def test_parse_endpoints_roundtrip():
    assert [str(e) for e in parse_endpoints("a://h:1,B://[::1]:2", "x")] == ["A://h:1", "B://[::1]:2"]


def test_environment_variables(monkeypatch):
    import argparse
    monkeypatch.setenv("MINIBROKER_LISTENERS", "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092")
    monkeypatch.setenv("MINIBROKER_ADVERTISED_LISTENERS", "INTERNAL://minibroker:29092,EXTERNAL://localhost:9092")
    monkeypatch.setenv("MINIBROKER_READY_FILE", "/tmp/ready")
    monkeypatch.setenv("MINIBROKER_EPHEMERAL", "true")
    p = argparse.ArgumentParser()
    add_serve_options(p)
    config = config_from_args(p.parse_args([]))
    assert [x.name for x in config.effective_listeners()] == ["INTERNAL", "EXTERNAL"]
    assert config.advertised(29092) == ("minibroker", 29092)
    assert str(config.ready_file) == "/tmp/ready" and config.ephemeral


def test_health_default_target_follows_the_broker_environment():
    from minibroker.cli.health import default_bootstrap
    assert default_bootstrap({}) == "localhost:9092"
    assert default_bootstrap({"MINIBROKER_PORT": "9093"}) == "localhost:9093"
    assert default_bootstrap({"MINIBROKER_HOST": "0.0.0.0", "MINIBROKER_PORT": "1"}) == "localhost:1"
    assert default_bootstrap({"MINIBROKER_HOST": "127.0.0.2"}) == "127.0.0.2:9092"
    env = {"MINIBROKER_LISTENERS": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092",
           "MINIBROKER_PORT": "9092"}
    assert default_bootstrap(env) == "localhost:29092"
    assert default_bootstrap({**env, "MINIBROKER_HEALTH_BOOTSTRAP": "x:1"}) == "x:1"
    # The apache/kafka-style environment (Testcontainers'): controller listeners are not bound.
    kafka = {"KAFKA_LISTENERS": "CONTROLLER://:9094,PLAINTEXT://:9092,BROKER://:9093",
             "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "MINIBROKER_PORT": "9999"}
    assert default_bootstrap(kafka) == "localhost:9092"


def test_protocols_come_from_the_map_or_name_themselves():
    got = _resolve("PLAINTEXT://:9092,SSL://:9093,INTERNAL://:9094")
    assert [(x.name, x.protocol, x.tls) for x in got] == [
        ("PLAINTEXT", "PLAINTEXT", False), ("SSL", "SSL", True), ("INTERNAL", "PLAINTEXT", False)]
    mapped = resolve("IN://:9092,OUT://:9093", None, host="127.0.0.1", port=9092, advertised_host=None,
                     advertised_port=None, protocol_map="IN:PLAINTEXT,OUT:SSL")
    assert [(x.name, x.protocol) for x in mapped] == [("IN", "PLAINTEXT"), ("OUT", "SSL")]
    # with a map, Kafka's rule: every listener name must be in it
    with pytest.raises(ListenerError, match="no security protocol defined for listener OTHER"):
        resolve("IN://:9092,OTHER://:9093", None, host="127.0.0.1", port=9092, advertised_host=None,
                advertised_port=None, protocol_map="IN:PLAINTEXT")
    with pytest.raises(ListenerError, match="not a security protocol"):
        resolve("IN://:9092", None, host="127.0.0.1", port=9092, advertised_host=None,
                advertised_port=None, protocol_map="IN:TLS")
