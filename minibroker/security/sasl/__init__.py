"""SASL (issue 20): SaslHandshake/SaslAuthenticate on SASL_PLAINTEXT and SASL_SSL listeners with
PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (unsecured JWS), sans-io. ``authenticator`` is one
connection's state machine; ``credentials`` the users; one module per mechanism.
``common`` holds what a connection needs before any mechanism (the anonymous principal, the
frame limit, ``AuthenticationFailed``): only it is imported at start-up, the rest on a SASL
listener's first use.

Imports: nothing outside ``security.sasl``.
"""
