"""ApiKey against kio's api key map (generated from Kafka's message JSON files), and the keys kio
0.6.5 does not know against the project's own schemas (minibroker_protocol.schemas)."""

from __future__ import annotations

import re

from kio.schema.index import api_key_map

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.schemas import EXTRA


def _kio_name(kio_module: str) -> str:
    # kio names modules in snake case ("init_producer_id"); Kafka's ApiKeys spells CamelCase.
    return re.sub(r"(?:^|_)([a-z])", lambda m: m.group(1).upper(), kio_module)


def test_every_member_matches_kio():
    for key in ApiKey:
        if key.value not in api_key_map:
            # not in kio: its schemas are the project's, named after Kafka's message
            entries = [e for (k, _v), e in EXTRA.items() if k == key.value]
            assert entries, key
            assert all(cls == f"{key.name}Request" for _m, cls, _rm, _rc in entries), key
            continue
        assert _kio_name(api_key_map[key.value]) == key.name


def test_members_are_ints():
    assert ApiKey.Produce == 0 and ApiKey.EndTxn == 26 and ApiKey(18) is ApiKey.ApiVersions
    assert f"{ApiKey.Fetch}" == "1"
