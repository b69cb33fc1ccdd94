"""Coordinators: what keeps state in an internal log and rebuilds it on start. The shared
pieces are here (``replay`` of an internal log, ``snapshot`` files, expiry ``timers``, the
``internal_topics`` that hold the state and decide which node coordinates a key, and how the
explain stories write times, ``story_time``); each coordinator is a sub-package: ``txn/``
(transactions), ``group/`` (classic and KIP-848 consumer groups). Share groups and streams
groups get their own sub-packages beside them.

Imports: ``core``, ``config``, ``cluster`` (placement); a sub-package imports this package's
top modules, never another sub-package.
"""
