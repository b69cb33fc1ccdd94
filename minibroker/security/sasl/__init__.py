"""SASL (issue 20): SaslHandshake/SaslAuthenticate on SASL_PLAINTEXT and SASL_SSL listeners with
PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (unsecured JWS), sans-io. ``authenticator`` is one
connection's state machine; ``credentials`` the users; one module per mechanism.

Only these constants are imported at start-up; the rest on a SASL listener's first use."""

# Kafka's principal of a connection that did not authenticate (KafkaPrincipal.ANONYMOUS)
ANONYMOUS = "User:ANONYMOUS"
# SaslServerAuthenticator.MAX_RECEIVE_SIZE: the largest frame read before authentication
MAX_UNAUTHENTICATED_FRAME = 524_288


class AuthenticationFailed(Exception):
    """A SASL failure: the caller answers ``error_code``/``message`` (when ``answer``) and closes
    the connection."""

    def __init__(self, error_code: int, message: str, reason: str, *, answer: bool = True,
                 user: str | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.reason = reason      # for the log: what went wrong, never a secret
        self.answer = answer      # False: close without an answer
        self.user = user          # the user name the client gave, if any
