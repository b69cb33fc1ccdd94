"""The Kafka listeners: binding sockets (``binding``), the early listener that answers
ApiVersions before the broker is imported (``early``), the connections (``server``) and the
dispatcher that decodes a request, runs it through fault rules and the request log, and calls
its handler (``dispatch``).

Imports: ``core``, ``config``, ``security``, ``cluster``, ``handlers``, ``control`` (fault rules,
the request log and counts are what the dispatcher consults and fills).
"""
