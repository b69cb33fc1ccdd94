"""Kafka 4.4 schema versions kio 0.6.5 (its newest release) does not have, in kio's own form.

Each is kio's generated class of the version before, with what the new version adds (Kafka's
clients/src/main/resources/common/message/*.json of 4.4, quoted in each module), one module per
API (``build.nested`` finds a response's nested classes in its module). ``codec`` looks here
before kio, so the broker, its tests and the differential client share one table.
"""

from __future__ import annotations

from .schema_api_versions_v5 import ApiVersionsRequestV5, ApiVersionsResponseV5
from .schema_delete_groups_v3 import DeleteGroupsRequestV3, DeleteGroupsResponseV3
from .schema_txn_offset_commit_v6 import TxnOffsetCommitRequestV6, TxnOffsetCommitResponseV6

__all__ = ["REQUESTS", "RESPONSES"]

# (api key, version) -> class
REQUESTS: dict[tuple[int, int], type] = {
    (18, 5): ApiVersionsRequestV5, (28, 6): TxnOffsetCommitRequestV6, (42, 3): DeleteGroupsRequestV3}
RESPONSES: dict[tuple[int, int], type] = {
    (18, 5): ApiVersionsResponseV5, (28, 6): TxnOffsetCommitResponseV6, (42, 3): DeleteGroupsResponseV3}
