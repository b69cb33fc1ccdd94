"""
StreamsGroupTopologyDescriptionUpdate v0 request (KIP-1331).

Kafka 4.4.0's StreamsGroupTopologyDescriptionUpdateRequest (kafka-clients-4.4.0.jar, common/message/StreamsGroupTopologyDescriptionUpdateRequest.json), which kio 0.6.5 does
not have, in kio's form so that kio's serializers read and write it
(minibroker_protocol.codec finds it when kio has none).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import GroupId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionNode:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    """The name of this node (e.g., KSTREAM-SOURCE-0000000000)."""
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    """The type of this node: 1=SOURCE, 2=PROCESSOR, 3=SINK."""
    source_topics: tuple[TopicName, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The source topics this node reads from."""
    sink_topic: TopicName | None = field(metadata={"kafka_type": "string"}, default=None)
    """The topic this node writes to."""
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The state store names accessed by this node."""
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The names of successor nodes in the processing graph."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionSubtopology:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology identifier, unique within the topology."""
    nodes: tuple[TopologyDescriptionNode, ...]
    """The processing nodes in this subtopology."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionGlobalStore:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    source: TopologyDescriptionNode
    """The source node providing data to the global store."""
    processor: TopologyDescriptionNode
    """The processor node that populates the global store."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescription:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopologies: tuple[TopologyDescriptionSubtopology, ...]
    """The subtopologies that make up this topology."""
    global_stores: tuple[TopologyDescriptionGlobalStore, ...]
    """Global state stores used by this topology."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    """The streams group identifier."""
    member_id: str = field(metadata={"kafka_type": "string"})
    """The ID of the streams group member sending the push."""
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The epoch of the topology being described."""
    topology_description: TopologyDescription
    """The topology description."""
