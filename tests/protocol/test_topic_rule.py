"""One topic-name rule: the protocol check and the catalog's agree on every name, each with its
own wording."""

from __future__ import annotations

import pytest

from minibroker_protocol.topics import MAX_NAME_LENGTH, topic_name_error
from minibroker_storage.catalog import validate_topic_name
from minibroker_storage.errors import InvalidTopic

NAMES = ["", ".", "..", "a", "a.b_c-D9", "x" * MAX_NAME_LENGTH, "x" * (MAX_NAME_LENGTH + 1),
         "bad name!", "tab\t", "ends\n", "ünï", "a/b", "...", "-_."]


@pytest.mark.parametrize("name", NAMES)
def test_protocol_and_catalog_agree(name):
    why = topic_name_error(name)
    try:
        validate_topic_name(name)
    except InvalidTopic:
        assert why is not None
    else:
        assert why is None


def test_each_keeps_its_wording():
    assert topic_name_error("bad name!") == (
        "Topic name \"bad name!\" is illegal, it contains a character other than "
        "ASCII alphanumerics, '.', '_' and '-'")
    with pytest.raises(InvalidTopic, match="has characters other than ASCII letters"):
        validate_topic_name("bad name!")
