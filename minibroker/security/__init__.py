"""Who may connect and what they may do: TLS contexts (``tls``), throw-away certificates
(``certs``, ``minibroker certs``), SASL (``sasl/``) and ACLs (``acl/``). Sans-io but for the
files they read.

Imports: ``core``, ``config``.
"""
