"""Schema formats without I/O: one module per ``schemaType`` (``avro``, ``json_schema``,
``protobuf``), each exposing ``FORMAT``, a :class:`base.SchemaFormat`. ``lookup.lookup`` imports a
format's module on first use, so a broker whose registry only ever sees AVRO never imports the
Protobuf parser.

Imports: nothing outside this package (the standard library and the format libraries).
"""
