"""Request and response schemas of Kafka 4.4 that kio 0.6.5 lacks, in kio's form.

``codec.request_type``/``response_type`` look here when kio has no schema for an API key and
version: ``EXTRA[(api_key, version)]`` names the request and response classes.
"""

from __future__ import annotations

from importlib import import_module

# (api key, version) -> (module of the request, its class, module of the response, its class)
EXTRA: dict[tuple[int, int], tuple[str, str, str, str]] = {
    (18, 5): ("api_versions_v5", "ApiVersionsRequestV5", "api_versions_v5", "ApiVersionsResponseV5"),
    (28, 6): ("txn_offset_commit_v6", "TxnOffsetCommitRequestV6",
              "txn_offset_commit_v6", "TxnOffsetCommitResponseV6"),
    (42, 3): ("delete_groups_v3", "DeleteGroupsRequestV3", "delete_groups_v3", "DeleteGroupsResponseV3"),
    (88, 1): ("streams_group_heartbeat_v1_request", "StreamsGroupHeartbeatRequest",
              "streams_group_heartbeat_v1_response", "StreamsGroupHeartbeatResponse"),
    (89, 1): ("streams_group_describe_v1_request", "StreamsGroupDescribeRequest",
              "streams_group_describe_v1_response", "StreamsGroupDescribeResponse"),
    (93, 0): ("streams_group_topology_description_update_v0_request",
              "StreamsGroupTopologyDescriptionUpdateRequest",
              "streams_group_topology_description_update_v0_response",
              "StreamsGroupTopologyDescriptionUpdateResponse"),
}


def load(api_key: int, version: int, request: bool):
    """The class, or None when there is no such extra schema."""
    entry = EXTRA.get((api_key, version))
    if entry is None:
        return None
    module, cls = (entry[0], entry[1]) if request else (entry[2], entry[3])
    return getattr(import_module(f"{__name__}.{module}"), cls)
