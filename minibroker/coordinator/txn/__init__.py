"""The transaction coordinator (Kafka's TransactionCoordinator): the state of a transactional
id (``state``), its transitions (``machine``), the coordinator (``coordinator``), the markers
it writes (``markers``), each transaction's timeline (``timeline``) and the plain-language
explanation and inspection of it (``explain``, ``inspect``) that the console and ``minibroker
txn`` show.

Imports: ``core``, ``config``, ``coordinator`` (its shared top), never ``coordinator.group``.
"""
