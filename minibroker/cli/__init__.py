"""The command line: ``minibroker`` itself (``main``: serve and the sub-commands), the
preflight checks before the broker is imported (``preflight``), and the tools: ``dump-log``,
``scrub``, ``health``, ``txn`` offline (``txn_offline``) and the control plane's client
(``control``: ``faults``, ``clock``, ``requests``, ``cluster``, ``txn``).

Imports: anything. ``main`` imports the broker (``app``) only when it serves, after the early
listener is up; each tool is imported only when it runs.
"""
