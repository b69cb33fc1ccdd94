"""Client programs for the client-level differential scenarios (tests/differential/test_client_scenarios.py).

Each scenario exists twice, as the same steps in two clients: ``rdkafka_scenarios.py``
(confluent-kafka / librdkafka, run as ``python -m tests.differential.clients.rdkafka_scenarios``)
and ``java/ClientScenarios.java`` (kafka-clients 4.x). A program runs one scenario against one
bootstrap address and prints one ``RESULT {json}`` line: the records each isolation level reads,
committed offsets, and the errors the client raised, each under a step label and normalised to
the client's own error name (``_FENCED``, ``ProducerFencedException``), never its message.
``programs.py`` runs them (and kills the crash scenario's first run with SIGKILL).
"""
