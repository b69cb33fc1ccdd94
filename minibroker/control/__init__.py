"""The control plane: the HTTP API and console (``http``, ``console``, ``views``,
``txn_routes``, ``metrics``, on the broker's loop, only with ``--control-listener``), fault
injection (``faults/``), what the broker records of the requests it served (``request_log``,
``request_counts``) and the duration syntax both sides share (``durations``). Its command-line
client is ``minibroker.cli.control``.

Imports: ``core``, ``config``, ``security``, ``coordinator``, ``client_metrics``, ``cluster``,
``handlers`` (the answer types fault actions write).
"""
