"""What every area may import: the broker's clock (``clock``, which tests and the control plane
move), named crash points (``crash_points``), the logging set-up (``logs``) and Java's
``String.hashCode`` (``java_hash``, Kafka's partition and coordinator choice).

Imports: nothing from ``minibroker`` (only ``minibroker_storage``/``minibroker_protocol``).
"""
