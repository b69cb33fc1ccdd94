"""What a connection needs of SASL before any mechanism is imported."""


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
