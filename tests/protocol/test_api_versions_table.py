"""The advertised ApiVersions table against kio's schemas and Kafka 4's minimums.

The table is read from the handler families' ``apis()`` (plus the ApiVersions
entry the Dispatcher registers itself). When a handler module cannot be
imported yet (another part of the tree is still being written), its ``Api(...)``
calls are read from the source instead, so these checks still run;
``test_live_table_matches_source`` then reports the import failure as a skip.
"""

from __future__ import annotations

import ast
import importlib
import struct
from pathlib import Path

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from minibroker_protocol import codec, schemas
from minibroker_protocol import fetch as fetch_wire
from minibroker_protocol import produce as produce_wire
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[2]
HANDLERS_DIR = ROOT / "minibroker" / "handlers"

# (module, family class) of every handler family.
FAMILIES = [
    ("minibroker.handlers.produce", "ProduceHandlers"),
    ("minibroker.handlers.fetch", "FetchHandlers"),
    ("minibroker.handlers.metadata", "MetadataHandlers"),
    ("minibroker.handlers.admin", "AdminHandlers"),
    ("minibroker.handlers.coordinator", "CoordinatorHandlers"),
    ("minibroker.handlers.txn", "TxnHandlers"),
    ("minibroker.handlers.txn_admin", "TxnAdminHandlers"),
    ("minibroker.handlers.group", "GroupHandlers"),
    ("minibroker.handlers.features", "FeatureHandlers"),
]

# Registered by Dispatcher.__init__ itself.
API_VERSIONS_RANGE = (0, 5)

# KIP-896 (Kafka 4.0 removes old protocol versions): lowest version a Kafka 4
# broker still accepts for the APIs minibroker serves.
KIP_896_MINIMUMS = {
    0: 3,  # Produce
    1: 4,  # Fetch
    2: 1,  # ListOffsets
    3: 0,  # Metadata
    18: 0,  # ApiVersions
    19: 2,  # CreateTopics
    20: 1,  # DeleteTopics
    32: 1,  # DescribeConfigs
}


# ---------------------------------------------------------------------------
# Reading the table
# ---------------------------------------------------------------------------


def _unwired(cls):
    """A handler family without its collaborators: ``apis()`` only names its methods."""
    return cls.__new__(cls)


def _live_table() -> dict[int, tuple[int, int]]:
    """{api_key: (min, max)} from the real handler classes (may raise ImportError)."""
    table = {ApiKey.ApiVersions: API_VERSIONS_RANGE}
    for mod_name, cls_name in FAMILIES:
        cls = getattr(importlib.import_module(mod_name), cls_name)
        for api in _unwired(cls).apis():
            assert api.key not in table, f"api key {api.key} registered twice"
            table[api.key] = (api.min_version, api.max_version)
    return table


def _eval(node: ast.expr, names: dict[str, object]):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.Attribute):
        return getattr(_eval(node.value, names), node.attr)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names)
    raise ValueError(f"cannot evaluate {ast.dump(node)}")


def _source_table() -> dict[int, tuple[int, int]]:
    """{api_key: (min, max)} read from the ``Api(...)`` calls in the handler sources."""
    table = {ApiKey.ApiVersions: API_VERSIONS_RANGE}
    for mod_name, _cls_name in FAMILIES:
        path = ROOT / (mod_name.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text(), str(path))
        names: dict[str, object] = {}
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant)
            ):
                names[stmt.targets[0].id] = stmt.value.value
            elif isinstance(stmt, ast.ImportFrom) and stmt.module == "minibroker_protocol":
                for alias in stmt.names:
                    names[alias.asname or alias.name] = importlib.import_module(
                        f"minibroker_protocol.{alias.name}"
                    )
            elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("minibroker_protocol."):
                module = importlib.import_module(stmt.module)
                for alias in stmt.names:
                    names[alias.asname or alias.name] = getattr(module, alias.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Api"
            ):
                key, lo, hi = (_eval(a, names) for a in node.args[:3])
                assert key not in table, f"api key {key} registered twice"
                table[key] = (lo, hi)
    return table


def advertised_table() -> dict[int, tuple[int, int]]:
    try:
        return _live_table()
    except Exception:  # a half-written module elsewhere must not hide these tests
        return _source_table()


TABLE = advertised_table()
PAIRS = sorted((k, v) for k, (lo, hi) in TABLE.items() for v in range(lo, hi + 1))


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


def test_live_table_matches_source():
    try:
        live = _live_table()
    except (ImportError, SyntaxError) as e:  # pragma: no cover - depends on the tree
        pytest.skip(f"handler modules not importable yet: {e}")
    assert live == _source_table()


def test_every_family_registers_api_key_members():
    try:
        apis = [api for mod_name, cls_name in FAMILIES
                for api in _unwired(getattr(importlib.import_module(mod_name), cls_name)).apis()]
    except (ImportError, SyntaxError) as e:  # pragma: no cover - depends on the tree
        pytest.skip(f"handler modules not importable yet: {e}")
    assert apis and all(type(api.key) is ApiKey for api in apis)


def test_table_covers_the_served_apis():
    assert set(KIP_896_MINIMUMS) <= set(TABLE)
    assert 60 in TABLE  # DescribeCluster


@pytest.mark.parametrize("api_key", sorted(TABLE))
def test_range_is_sane(api_key):
    lo, hi = TABLE[api_key]
    assert 0 <= lo <= hi


@pytest.mark.parametrize(("api_key", "version"), PAIRS)
def test_every_advertised_version_has_kio_schemas(api_key, version):
    # kio's, or for the Kafka 4.4 versions kio lacks, minibroker_protocol.schemas'
    extra_req = schemas.load(api_key, version, request=True)
    extra_resp = schemas.load(api_key, version, request=False)
    req = extra_req if extra_req is not None else load_request_schema(api_key, version)
    resp = extra_resp if extra_resp is not None else load_response_schema(api_key, version)
    assert req.__api_key__ == api_key and req.__version__ == version
    assert resp.__api_key__ == api_key and resp.__version__ == version
    # what the codec/dispatcher look up must agree
    assert codec.request_type(api_key, version) is req
    assert codec.response_type(api_key, version) is resp


@pytest.mark.parametrize("api_key", sorted(KIP_896_MINIMUMS))
def test_minimums_meet_kip_896(api_key):
    lo, _hi = TABLE[api_key]
    assert lo >= KIP_896_MINIMUMS[api_key]


def test_api_versions_is_v0_to_v5():
    assert TABLE[ApiKey.ApiVersions] == (0, 5)


def test_hand_written_codecs_cover_the_advertised_ranges():
    lo, hi = TABLE[0]
    assert produce_wire.MIN_VERSION <= lo and hi <= produce_wire.MAX_VERSION
    lo, hi = TABLE[1]
    assert fetch_wire.MIN_VERSION <= lo and hi <= fetch_wire.MAX_VERSION


def test_produce_uses_the_hand_written_decoder():
    try:
        from minibroker.handlers.produce import ProduceHandlers
    except ImportError as e:  # pragma: no cover
        pytest.skip(f"handler module not importable yet: {e}")
    (api,) = [a for a in _unwired(ProduceHandlers).apis() if a.key == 0]
    assert api.decoder is produce_wire.decode_produce


# -- The Dispatcher's own ApiVersions answers ---------------------------------


def _dispatcher():
    from minibroker.net.dispatch import Dispatcher

    return Dispatcher()


def _api_versions_request(version: int) -> bytes:
    cls = load_request_schema(ApiKey.ApiVersions, version)
    if version >= 3:
        entity = cls(client_software_name="minibroker-tests", client_software_version="1.0")
    else:
        entity = cls()
    return codec.encode_request(entity, correlation_id=4242, client_id="t")


@pytest.mark.parametrize("version", range(0, 5))
def test_dispatcher_answers_api_versions(version):
    d = _dispatcher()
    r = d.handle(memoryview(_api_versions_request(version)), None)
    chunks, size = r.chunks, r.size
    data = b"".join(bytes(c) for c in chunks)
    assert len(data) == size
    # KIP-511: response header v0 (no tagged-field byte) even for flexible v3+.
    assert struct.unpack_from(">i", data, 0) == (4242,)
    cls = load_response_schema(ApiKey.ApiVersions, version)
    resp, n = entity_reader(cls)(data[4:], 0)
    assert n == len(data) - 4
    assert resp.error_code == ErrorCode.none
    assert {(a.api_key, a.min_version, a.max_version) for a in resp.api_keys} == {
        (ApiKey.ApiVersions, 0, 5)
    }


def test_dispatcher_answers_unknown_api_versions_version_in_v0():
    d = _dispatcher()
    frame = struct.pack(">hhih", ApiKey.ApiVersions, 99, 7, -1) + b"\x00\x01\x02"
    r = d.handle(memoryview(frame), None)
    chunks, size = r.chunks, r.size
    data = b"".join(bytes(c) for c in chunks)
    assert len(data) == size
    assert struct.unpack_from(">i", data, 0) == (7,)
    resp, n = entity_reader(load_response_schema(ApiKey.ApiVersions, 0))(data[4:], 0)
    assert n == len(data) - 4
    assert resp.error_code == ErrorCode.unsupported_version
    assert [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys] == [
        (ApiKey.ApiVersions, 0, 5)
    ]
