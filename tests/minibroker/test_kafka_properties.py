"""Kafka's names for minibroker's options: KAFKA_* variables, server.properties, precedence."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from minibroker.config.options import ConfigError, FsyncPolicy, add_serve_options, load
from minibroker.config.properties import env_to_property, parse_properties


def ns(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("properties", nargs="?")
    add_serve_options(p)
    return p.parse_args(list(argv))


def test_env_names_follow_the_apache_kafka_image():
    assert env_to_property("KAFKA_ADVERTISED_LISTENERS") == "advertised.listeners"
    assert env_to_property("KAFKA_LOG_SEGMENT_BYTES") == "log.segment.bytes"
    assert env_to_property("KAFKA_SOME__UNDERSCORE") == "some_underscore"
    assert env_to_property("KAFKA_SOME___DASH") == "some-dash"


def test_properties_syntax():
    text = ("# comment\n! also a comment\n\nnum.partitions=4\nlog.dirs : /data\n"
            "advertised.listeners PLAINTEXT://h:1\nlisteners=PLAINTEXT://:9092,\\\n  B://:9093\n"
            "export KAFKA_NODE_ID=\"7\"\n")
    assert parse_properties(text, "f") == [
        (4, "num.partitions", "4"), (5, "log.dirs", "/data"),
        (6, "advertised.listeners", "PLAINTEXT://h:1"),
        (7, "listeners", "PLAINTEXT://:9092,B://:9093"), (9, "KAFKA_NODE_ID", "7")]


def test_kafka_variables_map_onto_options():
    env = {"KAFKA_NUM_PARTITIONS": "6", "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
           "KAFKA_LOG_DIRS": "/var/lib/kafka/data", "KAFKA_LOG_SEGMENT_BYTES": "1048576",
           "KAFKA_LOG_RETENTION_MS": "60000", "KAFKA_NODE_ID": "3",
           "KAFKA_LOG_FLUSH_INTERVAL_MS": "250", "KAFKA_MESSAGE_MAX_BYTES": "2000000",
           "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0", "KAFKA_HEAP_OPTS": "-Xmx1G",
           "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1", "KAFKA_PROCESS_ROLES": "broker,controller"}
    loaded = load(ns(), env)
    c = loaded.config
    assert (c.num_partitions, c.auto_create_topics, c.data_dir, c.segment_bytes, c.retention_ms,
            c.node_id, c.fsync, c.message_max_bytes, c.group_initial_rebalance_delay_ms) == \
        (6, False, Path("/var/lib/kafka/data"), 1048576, 60000, 3, FsyncPolicy("interval", 250),
         2000000, 0)
    notes = dict(loaded.notes)
    # Logged once, with every name; the launcher's own variables (HEAP_OPTS) are not properties.
    assert notes["config.kafka_properties_ignored"]["properties"] == \
        ["offsets.topic.replication.factor", "process.roles"]


def test_hours_and_minutes_become_milliseconds_and_ms_wins():
    assert load(ns(), {"KAFKA_LOG_RETENTION_HOURS": "2"}).config.retention_ms == 7_200_000
    assert load(ns(), {"KAFKA_LOG_RETENTION_HOURS": "-1"}).config.retention_ms == -1
    both = {"KAFKA_LOG_RETENTION_HOURS": "2", "KAFKA_LOG_RETENTION_MINUTES": "3",
            "KAFKA_LOG_RETENTION_MS": "5"}
    assert load(ns(), both).config.retention_ms == 5
    both.pop("KAFKA_LOG_RETENTION_MS")
    assert load(ns(), both).config.retention_ms == 180_000
    assert load(ns(), {"KAFKA_LOG_ROLL_HOURS": "1"}).config.segment_ms == 3_600_000


def test_precedence(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\nlog.segment.bytes=4096\nnode.id=5\nmessage.max.bytes=10\n")
    env = {"MINIBROKER_NUM_PARTITIONS": "3", "MINIBROKER_SEGMENT_BYTES": "8192",
           "KAFKA_LOG_SEGMENT_BYTES": "16384", "MINIBROKER_NODE_ID": "6"}
    loaded = load(ns(str(props), "--num-partitions", "4"), env)
    c = loaded.config
    # Only what took effect is reported as applied (node.id and num.partitions were overridden).
    assert dict(loaded.notes)["config.kafka_properties_applied"]["properties"] == \
        ["log.segment.bytes", "message.max.bytes"]
    assert dict(loaded.notes)["config.values_overridden"]["values"] == [
        f"MINIBROKER_NODE_ID='6' over {props}:3: node.id='5'",
        "--num-partitions '4' over MINIBROKER_NUM_PARTITIONS='3'",
        f"--num-partitions '4' over {props}:1: num.partitions='2'",
        "KAFKA_LOG_SEGMENT_BYTES='16384' over MINIBROKER_SEGMENT_BYTES='8192'",
        f"KAFKA_LOG_SEGMENT_BYTES='16384' over {props}:2: log.segment.bytes='4096'",
    ]
    assert c.num_partitions == 4            # command line over everything
    assert c.segment_bytes == 16384         # KAFKA_* over MINIBROKER_*
    assert c.node_id == 6                   # MINIBROKER_* over the file
    assert c.message_max_bytes == 10        # the file over the default
    wait = tmp_path / "late.properties"
    wait.write_text("KAFKA_LOG_SEGMENT_BYTES=32768\nMINIBROKER_NODE_ID=9\nnum.partitions=8\n")
    c = load(ns(str(props), "--num-partitions", "4", "--wait-for-config", str(wait)), env,
             read_wait_file=True).config
    assert (c.segment_bytes, c.node_id, c.num_partitions) == (32768, 9, 4)


def test_testcontainers_style_listeners():
    """The environment Testcontainers' KafkaContainer gives apache/kafka, plus the advertised
    listeners its start script exports: the controller listener is not bound, the others are."""
    env = {"KAFKA_LISTENERS": "PLAINTEXT://:9092,BROKER://:9093,CONTROLLER://:9094",
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
           "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_INTER_BROKER_LISTENER_NAME": "BROKER",
           "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:32768,BROKER://abc123:9093"}
    loaded = load(ns(), env)
    ls = loaded.config.effective_listeners()
    assert [(x.name, x.host, x.port, x.advertised_host, x.advertised_port) for x in ls] == [
        ("PLAINTEXT", "", 9092, "localhost", 32768), ("BROKER", "", 9093, "abc123", 9093)]
    assert dict(loaded.notes)["config.controller_listeners_dropped"]["names"] == ["CONTROLLER"]


def test_advertised_listeners_alone_advertise_the_host_port_listener():
    """Kafka's listeners default to PLAINTEXT://:9092: an image that sets only
    KAFKA_ADVERTISED_LISTENERS keeps listening where --host/--port say."""
    env = {"MINIBROKER_HOST": "0.0.0.0", "MINIBROKER_PORT": "9092",
           "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:40123"}
    (x,) = load(ns(), env).config.effective_listeners()
    assert (x.host, x.port, x.advertised_host, x.advertised_port) == ("0.0.0.0", 9092, "127.0.0.1", 40123)


def test_problems_name_their_source(tmp_path):
    """Every problem of every source at once, each naming the file and line or the variable."""
    props = tmp_path / "s.properties"
    props.write_text("num.partitions=0\nMINIBROKER_NOPE=1\n=novalue\n")
    with pytest.raises(ConfigError) as e:
        load(ns(str(props)), {"KAFKA_LOG_SEGMENT_BYTES": "x", "KAFKA_LISTENERS": "SSL://:9093"})
    assert e.value.problems == [
        f"{props}:3: '=novalue' is not KEY=VALUE",
        f"{props}:2: MINIBROKER_NOPE is not a minibroker option",
        f"{props}:1: num.partitions='0': must be at least 1 (Kafka's num.partitions)",
        "KAFKA_LOG_SEGMENT_BYTES='x': not an integer",
        "KAFKA_LISTENERS='SSL://:9093': --listeners: an SSL listener needs --ssl-certfile and "
        "--ssl-keyfile (PEM; 'minibroker certs DIR' writes a throw-away pair)",
    ]


def test_security_properties_of_an_apache_kafka_environment():
    # what a SASL + ACL set-up of the apache/kafka image sets, as minibroker reads it
    env = {"KAFKA_AUTHORIZER_CLASS_NAME": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "KAFKA_SUPER_USERS": "User:admin;User:ops", "KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true",
           "KAFKA_SASL_ENABLED_MECHANISMS": "SCRAM-SHA-512,PLAIN", "KAFKA_CONNECTIONS_MAX_REAUTH_MS": "60000"}
    c = load(ns(), env).config
    assert (c.authorizer, c.super_users, c.allow_everyone_if_no_acl_found, c.sasl_mechanisms,
            c.connections_max_reauth_ms) == ("standard", "User:admin;User:ops", True, "SCRAM-SHA-512,PLAIN",
                                             60000)
    with pytest.raises(ConfigError, match="authorizer"):
        load(ns(), {"KAFKA_AUTHORIZER_CLASS_NAME": "kafka.security.authorizer.AclAuthorizer"})
    with pytest.raises(ConfigError, match="GSSAPI"):
        load(ns(), {"KAFKA_SASL_ENABLED_MECHANISMS": "GSSAPI"})


def test_default_replication_factor_from_every_source(tmp_path):
    assert load(ns()).config.default_replication_factor == 1  # Kafka's default
    assert load(ns(), {"KAFKA_DEFAULT_REPLICATION_FACTOR": "3"}).config.default_replication_factor == 3
    assert load(ns(), {"MINIBROKER_DEFAULT_REPLICATION_FACTOR": "2"}).config.default_replication_factor == 2
    props = tmp_path / "server.properties"
    props.write_text("default.replication.factor=3\n")
    assert load(ns(str(props))).config.default_replication_factor == 3
    assert load(ns("--default-replication-factor", "2", str(props))).config.default_replication_factor == 2
    with pytest.raises(ConfigError) as e:
        load(ns("--default-replication-factor", "0"))
    assert "default.replication.factor" in e.value.problems[0], e.value.problems


def test_delegation_token_options_from_every_source(tmp_path):
    c = load(ns()).config
    assert (c.delegation_token_secret_key, c.delegation_token_max_lifetime_ms, c.delegation_token_expiry_time_ms,
            c.delegation_token_expiry_check_interval_ms) == (None, 604_800_000, 86_400_000, 3_600_000)  # Kafka's
    env = {"KAFKA_DELEGATION_TOKEN_SECRET_KEY": "from-env", "KAFKA_DELEGATION_TOKEN_MAX_LIFETIME_MS": "7200000"}
    c = load(ns(), env).config
    assert (c.delegation_token_secret_key, c.delegation_token_max_lifetime_ms) == ("from-env", 7_200_000)
    assert load(ns(), {"MINIBROKER_DELEGATION_TOKEN_SECRET_KEY": "mb"}).config.delegation_token_secret_key == "mb"
    props = tmp_path / "server.properties"
    props.write_text("delegation.token.secret.key=from-file\ndelegation.token.expiry.time.ms=60000\n"
                     "delegation.token.expiry.check.interval.ms=1000\n")
    c = load(ns(str(props))).config
    assert (c.delegation_token_secret_key, c.delegation_token_expiry_time_ms,
            c.delegation_token_expiry_check_interval_ms) == ("from-file", 60_000, 1_000)
    assert load(ns("--delegation-token-secret-key", "cli", str(props))).config.delegation_token_secret_key == "cli"
    with pytest.raises(ConfigError) as e:
        load(ns("--delegation-token-expiry-time-ms", "0"))
    assert e.value.problems == ["--delegation-token-expiry-time-ms '0': must be at least 1"]  # Kafka's atLeast(1)


def test_the_secret_key_is_never_shown(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("delegation.token.secret.key=file-secret\n")
    env = {"KAFKA_DELEGATION_TOKEN_SECRET_KEY": "env-secret", "MINIBROKER_DELEGATION_TOKEN_SECRET_KEY": "mb-secret"}
    loaded = load(ns("--delegation-token-secret-key", "cli-secret", str(props)), env)
    assert loaded.config.delegation_token_secret_key == "cli-secret"
    text = repr(loaded.notes)
    assert "config.values_overridden" in text and "KAFKA_DELEGATION_TOKEN_SECRET_KEY='***'" in text
    assert not any(f"{w}-secret" in text for w in ("file", "env", "mb", "cli")), text
