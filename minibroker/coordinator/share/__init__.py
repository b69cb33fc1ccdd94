"""Share groups (KIP-932) as Kafka 4.4 serves them, the sans-io cores: the delivery states of a
record (``record_state``), one share partition on its leader as a pure state machine
(``partition``), the share session cache (``sessions``), the ``simple`` assignor (``assignor``)
and the membership machine of ShareGroupHeartbeat/ShareGroupDescribe with its
``__consumer_offsets`` records (``group``). No I/O here: the handlers read the log, persist what
these return (in ``minibroker_protocol.share_log``'s bytes) and answer the clients.

Imports: ``core``, ``coordinator`` (its shared top), never ``coordinator.group`` or ``.txn``.
"""
