"""The Kafka APIs: one module per family of requests, each registering ``api.Api`` entries
with the dispatcher. ``api`` is what a handler sees and answers (the request context, the
response, ``Disconnect``); ``fetch_waiters`` parks long-polling Fetch requests.

Imports: ``core``, ``config``, ``security``, ``coordinator``, ``client_metrics``, ``cluster``.
"""
