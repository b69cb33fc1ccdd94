"""The group coordinator: classic groups (JoinGroup/SyncGroup: ``membership``, ``machine``),
KIP-848 consumer groups (``consumer_group``, ``consumer_member``, ``consumer_assignors``,
``consumer_regex``), what both share (``model``, ``state``), committed offsets (``offsets``)
and the ``__consumer_offsets``-style store (``store``), behind ``coordinator.GroupCoordinator``.

Imports: ``core``, ``config``, ``coordinator`` (its shared top), never ``coordinator.txn``.
"""
