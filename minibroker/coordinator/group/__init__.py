"""The group coordinator: classic groups (JoinGroup/SyncGroup: ``membership``, ``machine``),
KIP-848 consumer groups (``consumer_group``, ``consumer_member``, ``consumer_assignors``,
``consumer_regex``), KIP-1071 streams groups (``streams_group``, ``streams_state``,
``streams_topology``, ``streams_assignor``), what they share (``model``, ``state``), committed
offsets (``offsets``)
and the ``__consumer_offsets``-style store (``store``), behind ``coordinator.GroupCoordinator``.

Imports: ``core``, ``config``, ``coordinator`` (its shared top), never ``coordinator.txn``.
"""
