"""Coordinator records as Kafka's DumpLogSegments prints them with a decoder flag.

Kafka's CoordinatorRecordMessageParser (tools/…/DumpLogSegments.java) prints a key as
``{"type":"<record type>","data":{…}}`` and a value as ``{"version":"<v>","data":{…}}``, the data
being the generated ``*JsonConverter.write`` of the message: fields in schema order, camelCase
names, uuids as Kafka's base64 ``Uuid.toString``, a tagged field only when it differs from its
default, and Jackson's compact ``toString`` (no spaces, non-ASCII left as is). A null value is
``<DELETE>``. Only the two record types of ``__share_group_state`` are served here
(``--share-group-state-decoder``): that is the topic minibroker's share coordinator writes.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from minibroker_protocol import share_log as sl


def kafka_uuid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def _compact(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _batches(batches: tuple[sl.StateBatch, ...]) -> list[dict[str, int]]:
    return [{"firstOffset": b.first_offset, "lastOffset": b.last_offset,
             "deliveryState": b.delivery_state, "deliveryCount": b.delivery_count} for b in batches]


def share_state_key_json(key: sl.ShareStateKey) -> str:
    data = {"groupId": key.group_id, "topicId": kafka_uuid(key.topic_id), "partition": key.partition}
    return _compact({"type": str(key.record_type), "data": data})


def share_state_value_json(value: sl.ShareSnapshotValue | sl.ShareUpdateValue) -> str:
    data: dict[str, Any] = {"snapshotEpoch": value.snapshot_epoch}
    if isinstance(value, sl.ShareSnapshotValue):
        data["stateEpoch"] = value.state_epoch
    data.update(leaderEpoch=value.leader_epoch, startOffset=value.start_offset)
    if value.delivery_complete_count != -1:
        # Tagged (KIP-1226), declared after StartOffset in both schemas: the JsonConverter
        # writes it in that place, only when it is not the default, -1.
        data["deliveryCompleteCount"] = value.delivery_complete_count
    if isinstance(value, sl.ShareSnapshotValue):
        data.update(createTimestamp=value.create_timestamp, writeTimestamp=value.write_timestamp)
    data["stateBatches"] = _batches(value.state_batches)
    # Every value minibroker reads is version 0 (decode_value refuses the others).
    return _compact({"version": "0", "data": data})


def share_group_state_record(offset: int, key: bytes | None,
                             value: bytes | None) -> tuple[str, str | None, str | None]:
    """(key text, payload text or None, problem or None) for one record of ``__share_group_state``,
    in Kafka's words for the records it cannot decode: an unknown type is "skipping"
    and no payload, a record that does not parse is "Error at offset …"."""
    if key is None:
        problem = (f"Failed to decode message at offset {offset} using the specified decoder "
                   "(message had a missing key)")
        return problem, None, problem
    try:
        k = sl.decode_key(key)
    except sl.ShareLogFormatError as exc:
        if str(exc).startswith("not a share record key type"):
            record_type = int.from_bytes(key[:2], "big", signed=True)
            return f"Unknown record type {record_type} at offset {offset}, skipping.", None, None
        msg = f"Error at offset {offset}, skipping. {exc}"
        return msg, None, msg
    if not isinstance(k, sl.ShareStateKey):
        # A share group's record of __consumer_offsets (types 10-15): not the share coordinator's.
        return f"Unknown record type {k.record_type} at offset {offset}, skipping.", None, None
    if value is None:
        return share_state_key_json(k), "<DELETE>", None
    try:
        v = sl.decode_value(k.record_type, value)
    except sl.ShareLogFormatError as exc:
        msg = f"Error at offset {offset}, skipping. {exc}"
        return msg, None, msg
    if not isinstance(v, (sl.ShareSnapshotValue, sl.ShareUpdateValue)):  # decode_value follows the key
        msg = f"Error at offset {offset}, skipping. not a share state value"
        return msg, None, msg
    return share_state_key_json(k), share_state_value_json(v), None
