"""An error answer to any request, in the shape its version has: what a fault rule's
``error`` action sends instead of (or after) applying the request.

Kafka builds these per request class (``AbstractRequest.getErrorResponse``): every per-entry
error code of the answer is set, for the entries the request named. Here the same from the
schemas: a top-level ``error_code`` gets the code; the lists an answer echoes from its request
(topics and partitions of Produce, AddPartitionsToTxn, TxnOffsetCommit, OffsetCommit,
ListOffsets; FindCoordinator's keys) get one entry per entry asked about, each with the code.
Every other field takes the value that says "nothing": -1 for ids, epochs, offsets and ports,
empty strings and lists, null where the schema allows it.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from functools import cache
from typing import Any

from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import nested
from minibroker_protocol.errors import ErrorCode, for_version

ZERO = datetime.timedelta(0)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MINUS_ONE = ("_id", "epoch", "offset", "port", "timestamp", "leader", "generation")


class NoErrorShape(Exception):
    """The answer of this API has no place for an error code."""


@cache
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _nothing(cls, name: str, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple:
        return ()
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        return None
    if isinstance(hint, type):
        if issubclass(hint, datetime.timedelta):
            return ZERO
        if issubclass(hint, datetime.datetime):
            # the delegation-token answers' timestamps: -1 on an error, as Kafka's
            # DelegationTokenManager.ErrorTimestamp
            return _EPOCH - datetime.timedelta(milliseconds=1)
        if issubclass(hint, ErrorCode):
            return ErrorCode.none
        if issubclass(hint, bool):
            return False
        if issubclass(hint, int):
            return -1 if name.endswith(_MINUS_ONE) else 0
        if issubclass(hint, str):
            return ""
        if issubclass(hint, (bytes, bytearray)):
            return b""
        if issubclass(hint, uuid.UUID):
            return uuid.UUID(int=0)
        if dataclasses.is_dataclass(hint):
            return _blank(hint, {})
    raise NoErrorShape(f"{cls.__name__}.{name}: no empty value for {hint!r}")


def _blank(cls, values: dict[str, Any]) -> Any:
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _nothing(cls, f.name, hints[f.name])
    return cls(**kwargs)


def _has(cls, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def _topics(request: Any) -> list[tuple[str | None, uuid.UUID | None, list[int]]]:
    out = []
    topics = (getattr(request, "topics", None) or getattr(request, "v3_and_below_topics", None)
              or getattr(request, "topic_data", None) or ())
    for t in topics:
        name = getattr(t, "name", None)
        topic_id = getattr(t, "topic_id", None)
        parts = (getattr(t, "partitions", None) or getattr(t, "partition_indexes", None)
                 or getattr(t, "partition_data", None) or ())
        indexes = []
        for p in parts:
            index = p if isinstance(p, int) else next(
                (getattr(p, n) for n in ("index", "partition_index", "partition") if hasattr(p, n)), 0)
            indexes.append(index)
        out.append((name, topic_id, indexes))
    return out


_ECHOING = (ApiKey.Produce, ApiKey.AddPartitionsToTxn, ApiKey.TxnOffsetCommit, ApiKey.OffsetCommit,
            ApiKey.ListOffsets, ApiKey.FindCoordinator, ApiKey.Metadata, ApiKey.Fetch,
            ApiKey.OffsetFetch)


def error_shape_problem(api_key: int) -> str | None:
    """Why an error answer to this API cannot be made (checked when a rule is added)."""
    if api_key in _ECHOING:
        return None
    try:
        cls = codec.response_type(api_key, _max_version(api_key))
    except Exception:
        return f"API key {api_key} has no schema here"
    if _has(cls, "error_code"):
        return None
    return (f"{ApiKey(api_key).name} answers carry no top-level error code; use the actions "
            f"disconnect or drop-response for it")


def _max_version(api_key: int) -> int:
    """The newest version kio has a response schema for (its fields are a superset; Kafka 4
    dropped the oldest versions of some APIs, so the range may not start at 0)."""
    newest = 0
    for v in range(64):
        try:
            codec.response_type(api_key, v)
        except Exception:
            continue
        newest = v
    return newest


def error_entity(api_key: int, version: int, request: Any, code: int, message: str | None) -> Any:
    """The answer's kio entity carrying ``code`` wherever the request's entries expect one."""
    error = for_version(ErrorCode(code), api_key, version)
    cls = codec.response_type(api_key, version)
    text = message if message is not None else f"Injected fault: {error.name.upper()}"
    top: dict[str, Any] = {}
    if _has(cls, "error_code"):
        top["error_code"] = error
        if _has(cls, "error_message"):
            top["error_message"] = text
    if api_key == ApiKey.Produce:
        T, P = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")
        top["responses"] = tuple(
            _blank(T, {"name": name or "", "topic_id": tid or uuid.UUID(int=0), "partition_responses": tuple(
                _blank(P, {"index": i, "error_code": error, "error_message": text,
                           "log_append_time": None}) for i in parts)})
            for name, tid, parts in _topics(request))
    elif api_key == ApiKey.AddPartitionsToTxn and _has(cls, "results_by_topic_v3_and_below"):
        T = nested(cls, "AddPartitionsToTxnTopicResult")
        P = nested(cls, "AddPartitionsToTxnPartitionResult")
        top["results_by_topic_v3_and_below"] = tuple(
            _blank(T, {"name": name or "", "results_by_partition": tuple(
                _blank(P, {"partition_index": i, "partition_error_code": error}) for i in parts)})
            for name, _tid, parts in _topics(request))
    elif api_key in (ApiKey.TxnOffsetCommit, ApiKey.OffsetCommit):
        prefix = "TxnOffsetCommitResponse" if api_key == ApiKey.TxnOffsetCommit else "OffsetCommitResponse"
        T, P = nested(cls, prefix + "Topic"), nested(cls, prefix + "Partition")
        top["topics"] = tuple(
            _blank(T, {"name": name or "", **({"topic_id": tid} if tid is not None else {}),
                       "partitions": tuple(_blank(P, {"partition_index": i, "error_code": error})
                                           for i in parts)})
            for name, tid, parts in _topics(request))
    elif api_key == ApiKey.ListOffsets:
        T, P = nested(cls, "ListOffsetsTopicResponse"), nested(cls, "ListOffsetsPartitionResponse")
        top["topics"] = tuple(
            _blank(T, {"name": name or "", "partitions": tuple(
                _blank(P, {"partition_index": i, "error_code": error}) for i in parts)})
            for name, _tid, parts in _topics(request))
    elif api_key == ApiKey.Fetch:
        # Each partition asked for, with the error and no records (FetchRequest.getErrorResponse).
        T, P = nested(cls, "FetchableTopicResponse"), nested(cls, "PartitionData")
        top["responses"] = tuple(
            _blank(T, {"topic": getattr(t, "topic", None) or "",
                       **({"topic_id": t.topic_id} if getattr(t, "topic_id", None) else {}),
                       "partitions": tuple(_blank(P, {"partition_index": p.partition, "error_code": error,
                                                      "records": None})
                                           for p in getattr(t, "partitions", None) or ())})
            for t in getattr(request, "topics", None) or ())
    elif api_key == ApiKey.OffsetFetch and _has(cls, "topics"):
        # v1-7: every partition asked about carries the error (v2+ also at the top)
        T, P = nested(cls, "OffsetFetchResponseTopic"), nested(cls, "OffsetFetchResponsePartition")
        top["topics"] = tuple(
            _blank(T, {"name": name or "", "partitions": tuple(
                _blank(P, {"partition_index": i, "error_code": error, "metadata": None}) for i in parts)})
            for name, _tid, parts in _topics(request))
    elif api_key == ApiKey.OffsetFetch and _has(cls, "groups"):
        G = nested(cls, "OffsetFetchResponseGroup")
        top["groups"] = tuple(_blank(G, {"group_id": getattr(g, "group_id", ""), "error_code": error})
                              for g in getattr(request, "groups", None) or ())
    elif api_key == ApiKey.Metadata and getattr(request, "topics", None):
        # As Kafka's MetadataRequest.getErrorResponse: each topic asked about with the error.
        T = nested(cls, "MetadataResponseTopic")
        top["topics"] = tuple(_blank(T, {"name": getattr(t, "name", None), "error_code": error,
                                         "is_internal": False})
                              for t in request.topics)
    elif api_key == ApiKey.FindCoordinator and _has(cls, "coordinators"):
        C = nested(cls, "Coordinator")
        top["coordinators"] = tuple(
            _blank(C, {"key": k, "error_code": error, "error_message": text, "host": ""})
            for k in getattr(request, "coordinator_keys", ()) or ())
    elif "error_code" not in top:
        raise NoErrorShape(f"{ApiKey(api_key).name} v{version} answers carry no top-level error "
                           f"code; use the actions disconnect or drop-response for it")
    return _blank(cls, top)
