"""Share groups (KIP-932), the sans-io cores: the ``simple`` assignor (``assignor``) and the
membership machine of ShareGroupHeartbeat/ShareGroupDescribe with its ``__consumer_offsets``
records (``group``). Their records' bytes are ``minibroker_protocol.share_log``'s.

Imports: ``core``, ``coordinator`` (its shared top), never ``coordinator.group`` or ``.txn``.
"""
