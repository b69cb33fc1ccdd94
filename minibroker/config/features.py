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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker_storage.lazylog import get_logger

log = get_logger("minibroker.features")

__all__ = ["FeatureSpec", "Features", "FeatureError", "TRANSACTION_VERSION", "GROUP_VERSION",
           "SHARE_VERSION", "STREAMS_VERSION", "SPECS",
           "UPGRADE", "SAFE_DOWNGRADE", "UNSAFE_DOWNGRADE"]

# UpdateFeatures' upgrade types (FeatureUpdate.UpgradeType).
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True)
class FeatureSpec:
    """A finalizable feature (Kafka's Feature enum): its name and the levels this broker supports."""
    name: str
    min_supported: int
    max_supported: int
    default_level: int


# Kafka 4.x defaults a new cluster to the newest level of each; minibroker's default is the
# newest level it serves.
TRANSACTION_VERSION = FeatureSpec("transaction.version", 0, 2, 2)
GROUP_VERSION = FeatureSpec("group.version", 0, 1, 1)
# share.version 1 is share groups (ShareVersion.supportsShareGroups); 2 adds the dead-letter
# queues of KIP-1191 (ShareVersion.supportsShareGroupDLQ: what a group archives goes to its
# errors.deadletterqueue.topic.name first, coordinator/share/dlq.py). Kafka 4.4 finalizes 2 on a
# fresh cluster (ShareVersion.LATEST_PRODUCTION, seen on the reference).
SHARE_VERSION = FeatureSpec("share.version", 0, 2, 2)
# Kafka 4.4 finalizes streams.version 1 on a fresh cluster (seen on the reference): streams
# groups (KIP-1071), StreamsGroupHeartbeat and StreamsGroupDescribe.
STREAMS_VERSION = FeatureSpec("streams.version", 0, 1, 1)
SPECS: tuple[FeatureSpec, ...] = (TRANSACTION_VERSION, GROUP_VERSION, SHARE_VERSION,
                                  STREAMS_VERSION)


class FeatureError(ValueError):
    """A level outside what minibroker supports for the feature, or an unknown feature."""


class Features:
    """The finalized level of each feature, and the epoch of the last change."""

    def __init__(self, specs: Iterable[FeatureSpec] = SPECS, levels: dict[str, int] | None = None,
                 epoch: int = 0, persist: Callable[[dict[str, int], int], None] | None = None) -> None:
        self.specs = {s.name: s for s in specs}
        self._levels = {s.name: s.default_level for s in self.specs.values()}
        self.epoch = epoch
        self._persist = persist
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

    def levels(self) -> dict[str, int]:
        return dict(self._levels)

    def update(self, updates: Sequence[tuple[str, int, int]], validate_only: bool, node_id: int,
               *, quiet: bool = False) -> str | None:
        """UpdateFeatures: (feature, level, upgrade type) each, all or none applied.

        Returns None, or the message Kafka's controller answers with INVALID_UPDATE_VERSION for
        the first update it refuses (FeatureControlManager.updateFeature; the wording and the
        epoch rule checked against Kafka 4.4 by tests/differential/test_features.py). A request
        that changes anything, even to the same level, bumps the epoch once.
        """
        for name, level, upgrade_type in updates:
            why = self._refusal(name, level, upgrade_type, node_id)
            if why is not None:
                return (f"The update failed for all features since the following feature had an error: "
                        f"Invalid update version {level} for feature {name}. {why}")
        if validate_only or not updates:
            return None
        changed = []
        for name, level, _ in updates:
            old = self._levels[name]
            self._levels[name] = level
            changed.append((name, old, level))
        self.epoch += 1
        if self._persist is not None:
            self._persist(dict(self._levels), self.epoch)
        for name, old, level in changed:
            if not quiet:
                log.info("features.level_finalized", feature=name, old_level=old, level=level,
                         epoch=self.epoch)
            for listener in self._listeners:
                listener(name, old, level)
        return None

    def _refusal(self, name: str, level: int, upgrade_type: int, node_id: int) -> str | None:
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return "The controller does not support the given upgrade type."
        if level < 0:
            return "A feature version cannot be less than 0."
        spec = self.specs.get(name)
        if spec is None:
            return f"Local controller {node_id} does not support this feature."
        if not spec.min_supported <= level <= spec.max_supported:
            return (f"Local controller {node_id} only supports versions "
                    f"{spec.min_supported}-{spec.max_supported}")
        current = self._levels[name]
        if upgrade_type == UPGRADE and level < current:
            return ("Can't downgrade the version of this feature without setting the upgrade type to "
                    "either safe or unsafe downgrade.")
        if upgrade_type != UPGRADE and level > current:
            return "Can't downgrade to a newer version."
        return None

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

    @property
    def share_version(self) -> int:
        return self._levels[SHARE_VERSION.name]

    @property
    def streams_version(self) -> int:
        return self._levels[STREAMS_VERSION.name]


def load_features(config: Any, dry_run: bool = False) -> Features:
    """The levels the data dir finalized last (storage/feature_levels.py), then the levels the
    command line asks for (``--transaction-version``, ``--group-version``), which win and are
    persisted like an UpdateFeatures.

    A new data dir (no ``meta.properties`` yet) starts at the default levels and writes them at
    once, as ``kafka-storage.sh format`` writes a new cluster's FeatureLevelRecords. A data dir
    an older minibroker made keeps the levels it ran at, as Kafka keeps an upgraded cluster's
    finalized levels until ``kafka-features.sh upgrade``: one without ``share.version`` in its
    levels (or without the levels file, where nothing was ever changed) predates share groups and
    gets ``share.version`` 0 — share groups are then off (UNSUPPORTED_VERSION) until an
    UpdateFeatures raises it, unless the data dir already holds share state (a build that served
    share groups at its default level before writing the levels of new data dirs). Likewise a
    data dir whose levels lack ``streams.version`` gets it at 0.

    ``dry_run``: the same levels and epoch, with nothing written or logged (the early listener's
    view, minibroker/net/early.py; an ephemeral broker's data dir is a new one, empty)."""
    from minibroker_storage import feature_levels

    data_dir = config.data_dir
    ephemeral = getattr(config, "ephemeral", False)
    fresh = (dry_run and ephemeral) or not (Path(data_dir) / "meta.properties").exists()
    levels: dict[str, int] = {}
    epoch = 0
    unreadable = False
    try:
        found = None if dry_run and ephemeral else feature_levels.load(data_dir)
    except feature_levels.FeatureLevelsError as e:
        if not dry_run:
            log.warning("features.file_unreadable", reason=str(e), action="default levels")
        found, unreadable = None, True
    if found is not None:
        levels, epoch = found
        for name, level in list(levels.items()):
            spec = next((s for s in SPECS if s.name == name), None)
            if spec is None or not spec.min_supported <= level <= spec.max_supported:
                if not dry_run:
                    log.warning("features.level_ignored", feature=name, level=level,
                                reason="not a level this minibroker serves")
                del levels[name]
    older = not fresh and not unreadable and (found is None or SHARE_VERSION.name not in found[0])
    if older and SHARE_VERSION.name not in levels and not _holds_share_state(Path(data_dir)):
        levels[SHARE_VERSION.name] = 0
        if not dry_run:
            log.info("features.share_groups_off", feature=SHARE_VERSION.name, level=0,
                     reason="a data dir from a minibroker without share groups keeps its levels",
                     hint=f"UpdateFeatures (kafka-features.sh upgrade --feature "
                          f"{SHARE_VERSION.name}={SHARE_VERSION.default_level}) turns them on")
    # the same for streams groups: a data dir whose levels predate streams.version keeps them off
    # until an UpdateFeatures turns them on (their groups are not persisted, so no state to find)
    older_streams = not fresh and not unreadable and (found is None or STREAMS_VERSION.name not in found[0])
    if older_streams and STREAMS_VERSION.name not in levels:
        levels[STREAMS_VERSION.name] = 0
        if not dry_run:
            log.info("features.streams_groups_off", feature=STREAMS_VERSION.name, level=0,
                     reason="a data dir from a minibroker without streams groups keeps its levels",
                     hint=f"UpdateFeatures (kafka-features.sh upgrade --feature "
                          f"{STREAMS_VERSION.name}={STREAMS_VERSION.default_level}) turns them on")
    persist = None if dry_run else (lambda lv, ep: feature_levels.save(data_dir, lv, ep))
    features = Features(levels=levels, epoch=epoch, persist=persist)
    if persist is not None and ((fresh and found is None and not unreadable) or older or older_streams):
        # the levels this data dir runs at from now on, whatever a later default becomes
        persist(features.levels(), features.epoch)
    asked = [(spec.name, level) for spec, level in ((TRANSACTION_VERSION, config.transaction_version),
                                                   (GROUP_VERSION, config.group_version))
             if level is not None and level != features.level(spec.name)]
    if asked:
        features.update([(name, level, UPGRADE if level > features.level(name) else UNSAFE_DOWNGRADE)
                         for name, level in asked], validate_only=False, node_id=config.node_id,
                        quiet=dry_run)
    return features


def _holds_share_state(data_dir: Path) -> bool:
    # share-history.jsonl is made at every start by the builds that serve share groups (at
    # share.version 2 by default, and without writing the levels of a new data dir), never by
    # older ones; __share_group_state at a share group's first heartbeat
    from minibroker_protocol.topics import SHARE_GROUP_STATE_TOPIC

    try:
        return ((data_dir / "share-history.jsonl").exists()
                or any(p.name.startswith(SHARE_GROUP_STATE_TOPIC + "-") for p in data_dir.iterdir()))
    except OSError:
        return False
