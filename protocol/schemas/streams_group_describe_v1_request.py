"""
StreamsGroupDescribe v1 request: IncludeTopologyDescription is added.

Kafka 4.4.0's StreamsGroupDescribeRequest (kafka-clients-4.4.0.jar, common/message/StreamsGroupDescribeRequest.json), which kio 0.6.5 does
not have: kio's generated v0 module with the changes of v1, in kio's form so that kio's
serializers read and write it (minibroker_protocol.codec finds it when kio has none).
"""


from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import GroupId
from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_ids: tuple[GroupId, ...] = field(
        metadata={"kafka_type": "string"}, default=()
    )
    """The ids of the groups to describe"""
    include_authorized_operations: bool = field(metadata={"kafka_type": "bool"})
    """Whether to include authorized operations."""
    include_topology_description: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """Whether to include the topology description of each group (KIP-1331)."""
