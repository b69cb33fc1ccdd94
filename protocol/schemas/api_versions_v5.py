"""ApiVersions v5 (Kafka 4.4, KIP-1242), which kio 0.6.5 lacks: see ``minibroker_protocol.schemas``.

"Version 5 introduces ClusterId and NodeId checking and REBOOTSTRAP_REQUIRED error": the request
names the cluster and node the client means to reach (null / -1: not known); the response's
layout is v4's.
"""

# no "from __future__ import annotations": kio reads the fields' types at runtime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

__all__ = ["ApiVersion", "ApiVersionsRequestV5", "ApiVersionsResponseV5", "FinalizedFeatureKey",
           "SupportedFeatureKey"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequestV5:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    client_software_name: str = field(metadata={"kafka_type": "string"})
    client_software_version: str = field(metadata={"kafka_type": "string"})
    cluster_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    node_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersion:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    api_key: i16 = field(metadata={"kafka_type": "int16"})
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    max_version: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SupportedFeatureKey:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    max_version: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizedFeatureKey:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    max_version_level: i16 = field(metadata={"kafka_type": "int16"})
    min_version_level: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsResponseV5:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    api_keys: tuple[ApiVersion, ...]
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    supported_features: tuple[SupportedFeatureKey, ...] = field(metadata={"tag": 0}, default=())
    finalized_features_epoch: i64 = field(metadata={"kafka_type": "int64", "tag": 1}, default=i64(-1))
    finalized_features: tuple[FinalizedFeatureKey, ...] = field(metadata={"tag": 2}, default=())
    zk_migration_ready: bool = field(metadata={"kafka_type": "bool", "tag": 3}, default=False)
