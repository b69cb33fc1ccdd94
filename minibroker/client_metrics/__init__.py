"""KIP-714 client metrics: subscriptions (CLIENT_METRICS config resources), the client
instances that ask for them, and what those clients pushed.

Imports: ``core``, ``config``.
"""
