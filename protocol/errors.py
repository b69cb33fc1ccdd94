"""Kafka error codes (kio's generated enum, from Kafka's Errors.java)."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
