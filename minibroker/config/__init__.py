"""What the broker is told: the command line and its Kafka names (``options``: ``Config``),
``server.properties`` and ``KAFKA_*`` (``properties``), topic configs (``topic_configs``),
feature levels (``features``), listener lists (``listeners``), and what an older Kafka
release served (``as_version``, ``kafka_releases``, ``served_apis``). Data and parsing, no I/O
beyond reading the files it is pointed at.

Imports: ``core``.
"""
