"""--schema-registry-listener and --schema-registry-auth, from the command line, KAFKA_*,
MINIBROKER_* and server.properties, and their one-line refusals."""
from __future__ import annotations

import pytest

from minibroker.config.options import ConfigError, load

from ..test_kafka_properties import ns


def test_off_by_default_and_the_url_forms():
    assert load(ns(), {}).config.schema_registry_listener is None
    assert load(ns("--schema-registry-listener", "127.0.0.1:8081"), {}).config.schema_registry_listener == (
        "http", "127.0.0.1", 8081)
    assert load(ns("--schema-registry-listener", "http://0.0.0.0:8081"), {}).config.schema_registry_listener == (
        "http", "0.0.0.0", 8081)
    assert load(ns("--schema-registry-listener", "8081"), {}).config.schema_registry_listener == (
        "http", "127.0.0.1", 8081)


def test_kafka_and_minibroker_variables_and_properties(tmp_path):
    env = {"KAFKA_SCHEMA_REGISTRY_LISTENERS": "http://0.0.0.0:18081"}
    assert load(ns(), env).config.schema_registry_listener == ("http", "0.0.0.0", 18081)
    env = {"MINIBROKER_SCHEMA_REGISTRY_LISTENER": "http://127.0.0.1:28081"}
    assert load(ns(), env).config.schema_registry_listener == ("http", "127.0.0.1", 28081)
    props = tmp_path / "server.properties"
    props.write_text("schema.registry.listeners=http://127.0.0.1:38081\n")
    assert load(ns(str(props)), {}).config.schema_registry_listener == ("http", "127.0.0.1", 38081)


@pytest.mark.parametrize("argv,words", [
    (["--schema-registry-listener", "ftp://h:1"], "neither http:// nor https://"),
    (["--schema-registry-listener", "https://127.0.0.1:8081"], "needs --ssl-certfile"),
    (["--schema-registry-listener", "http://a:1,http://b:2"], "one listener only"),
    (["--schema-registry-listener", "127.0.0.1:8081", "--schema-registry-auth", "basic"],
     "--sasl-users"),
])
def test_refusals_are_one_line(argv, words):
    with pytest.raises(ConfigError) as e:
        load(ns(*argv), {})
    assert words in str(e.value) and "\n" not in str(e.value).strip()
