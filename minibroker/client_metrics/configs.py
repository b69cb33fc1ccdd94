"""A client metrics subscription's configs, parsed and checked as Kafka checks them.

Kafka: server/.../metrics/ClientMetricsConfigs.java. A subscription is a CLIENT_METRICS config
resource with three configs: ``metrics`` (metric name prefixes; ``*`` for all), ``interval.ms``
(100 to 3,600,000) and ``match`` (``selector=regex`` pairs over the client's attributes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from minibroker_protocol.errors import ErrorCode

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
NAMES = (METRICS, INTERVAL_MS, MATCH)
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
# DescribeConfigs config_type: metrics and match are LIST, interval.ms INT (ConfigDef.Type)
TYPES = {METRICS: 7, INTERVAL_MS: 3, MATCH: 7}
DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}
DOCS = {METRICS: "Telemetry metric name prefix list", INTERVAL_MS: "Metrics push interval in milliseconds",
        MATCH: "Client match criteria"}

CLIENT_INSTANCE_ID = "client_instance_id"
SELECTORS = (CLIENT_INSTANCE_ID, "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")


class SubscriptionError(ValueError):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: dict[str, re.Pattern] = field(default_factory=dict)

    def matches(self, attributes: dict[str, str | None]) -> bool:
        # every pattern must match its attribute in full (Java's Matcher.matches)
        return all((value := attributes.get(k)) is not None and p.fullmatch(value)
                   for k, p in self.match.items())


def java_list(text: str) -> list[str]:
    """ConfigDef.Type.LIST: comma separated, blanks around commas trimmed, "" = no element."""
    text = text.strip()
    return [] if not text else re.split(r"\s*,\s*", text)


def parse(name: str, configs: dict[str, str]) -> Subscription:
    """A subscription from its configs, or SubscriptionError with Kafka's code and message."""
    if not name:
        raise SubscriptionError(ErrorCode.invalid_request, "Subscription name can't be empty")
    for key in configs:
        if key not in NAMES:
            raise SubscriptionError(ErrorCode.invalid_request, f"Unknown client metrics configuration: {key}")
    interval = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in configs:
        text = configs[INTERVAL_MS].strip()
        try:
            interval = int(text)
            if not -2**31 <= interval < 2**31:
                raise ValueError
        except ValueError:
            raise SubscriptionError(
                ErrorCode.invalid_config,
                f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                "Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise SubscriptionError(
                ErrorCode.invalid_request,
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and "
                "3600000 (1 hour)")
    return Subscription(name, tuple(java_list(configs.get(METRICS, ""))), interval,
                        parse_match(java_list(configs.get(MATCH, ""))))


def parse_match(patterns: list[str]) -> dict[str, re.Pattern]:
    out = {}
    for pattern in patterns:
        pair = _java_split(pattern, "=")
        if len(pair) != 2 or pair[0].strip() not in SELECTORS:
            raise SubscriptionError(ErrorCode.invalid_config, f"Illegal client matching pattern: {pattern}")
        try:
            out[pair[0].strip()] = re.compile(pair[1].strip())
        except re.error:
            raise SubscriptionError(ErrorCode.invalid_config,
                                    f"Illegal client matching pattern: {pattern}") from None
    return out


def _java_split(text: str, sep: str) -> list[str]:
    """Java's String.split: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts
