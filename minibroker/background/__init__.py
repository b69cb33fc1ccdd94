"""The broker's periodic work outside requests: snapshots, retention, the expiry timers
(``loops``) and the scrubber that re-reads segments (``scrubber``).

Imports: ``core``, ``config``, ``coordinator``.
"""
