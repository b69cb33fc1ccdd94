"""The built-in Schema Registry (issue 34): Confluent Schema Registry's REST API (v1) served by
the broker's own process, its state kept in the ``_schemas`` compacted topic in Confluent's
key/value JSON so that a Confluent registry or Karapace pointed at the same broker reads the same
subjects, versions and ids.

``formats/`` holds the schema formats (AVRO, JSON, PROTOBUF) without I/O: parsing, the canonical
string that is a schema's identity, ``normalize``, and the compatibility rules. The rest of the
package is the registry itself: its state machine over the ``_schemas`` records, the REST routes,
and the listener.

Imports: ``core``, ``config``, ``security`` (the listener's TLS context and the ``--sasl-users``
users for HTTP basic auth), ``coordinator`` (its ``replay`` of an internal log reads ``_schemas``
back). The broker hands it a way to append to and read ``_schemas``; it never
imports ``broker``, ``handlers`` or ``net``.
"""
