"""Topic name rules (Kafka's org.apache.kafka.common.internals.Topic)."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249  # room for "-<partition>" suffixes in directory names
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})


def has_legal_chars(name: str) -> bool:
    """Only ASCII alphanumerics, '.', '_' and '-' (Topic.containsValidPattern), the whole name."""
    return _LEGAL.fullmatch(name) is not None


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters"
    if not has_legal_chars(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
