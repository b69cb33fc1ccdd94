"""Feature flags as Kafka's KRaft cluster keeps them (KIP-584): supported ranges, finalized levels.

A client learns what protocol a cluster runs from ApiVersions v3+: the features the broker
*supports* (a min–max range each) and the levels the cluster has *finalized*, stamped with an
epoch. The Java client trusts finalized levels only when that epoch is ≥ 0 and uses
``transaction.version`` ≥ 2 to switch to transactions v2 (KIP-890); franz-go does the same.
A feature at level 0 is not listed as finalized (Kafka's FeaturesImage drops level 0), and
ApiVersions below v4 omits supported features whose minimum is 0
(ApiVersionsResponse.json: "in v0-v3, features with MinSupportedVersion = 0 are omitted").

The supported range of a feature is what minibroker implements: a level is only listed once
every part of it works. Levels change at start (options) or at runtime (UpdateFeatures); each
change bumps the epoch, so a client that cached the old levels sees a newer epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["FeatureSpec", "Features", "FeatureError", "TRANSACTION_VERSION", "GROUP_VERSION", "SPECS"]


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    min_supported: int
    max_supported: int
    default_level: int


# Kafka 4.x defaults a new cluster to the newest level of each; minibroker's default is the
# newest level it serves.
TRANSACTION_VERSION = FeatureSpec("transaction.version", 0, 1, 1)
GROUP_VERSION = FeatureSpec("group.version", 0, 0, 0)
SPECS: tuple[FeatureSpec, ...] = (TRANSACTION_VERSION, GROUP_VERSION)


class FeatureError(ValueError):
    """A level outside what minibroker supports for the feature, or an unknown feature."""


class Features:
    """The finalized level of each feature, and the epoch of the last change."""

    def __init__(self, specs: Iterable[FeatureSpec] = SPECS, levels: dict[str, int] | None = None,
                 epoch: int = 0) -> None:
        self.specs = {s.name: s for s in specs}
        self._levels = {s.name: s.default_level for s in self.specs.values()}
        self.epoch = epoch
        self._listeners: list[Callable[[str, int, int], None]] = []
        for name, level in (levels or {}).items():
            self.check(name, level)
            self._levels[name] = level

    def check(self, name: str, level: int) -> FeatureSpec:
        spec = self.specs.get(name)
        if spec is None:
            raise FeatureError(f"unknown feature {name!r}")
        if not spec.min_supported <= level <= spec.max_supported:
            raise FeatureError(f"{name} level {level} is outside the supported range "
                               f"{spec.min_supported}-{spec.max_supported}")
        return spec

    def level(self, name: str) -> int:
        return self._levels[name]

    def set_level(self, name: str, level: int) -> None:
        """Finalize ``name`` at ``level`` (validated), bump the epoch and tell the listeners."""
        self.check(name, level)
        old = self._levels[name]
        self._levels[name] = level
        self.epoch += 1
        for listener in self._listeners:
            listener(name, old, level)

    def on_change(self, listener: Callable[[str, int, int], None]) -> None:
        self._listeners.append(listener)

    def supported(self, api_version: int) -> list[tuple[str, int, int]]:
        """(name, min, max) for ApiVersions of ``api_version``."""
        return [(s.name, s.min_supported, s.max_supported) for s in self.specs.values()
                if api_version >= 4 or s.min_supported > 0]

    def finalized(self) -> list[tuple[str, int]]:
        """(name, level) of every feature finalized above level 0."""
        return [(name, level) for name, level in self._levels.items() if level > 0]

    @property
    def transaction_version(self) -> int:
        return self._levels[TRANSACTION_VERSION.name]

    @property
    def group_version(self) -> int:
        return self._levels[GROUP_VERSION.name]
