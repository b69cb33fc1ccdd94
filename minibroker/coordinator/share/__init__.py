"""Share groups (KIP-932) as Kafka 4.4 serves them: the delivery states of a record
(``record_state``), one share partition on its leader as a pure state machine (``partition``)
and the share session cache (``sessions``). No I/O here: the handlers read the log, persist
what these return and answer the clients.

Imports: ``minibroker_protocol`` only.
"""
