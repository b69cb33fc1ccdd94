"""SASL mechanisms (issue 20), sans-io: PLAIN and SCRAM-SHA-256/512 servers. Not wired into the
listeners yet: SaslHandshake/SaslAuthenticate handling, the users file and the credential APIs
come next."""
