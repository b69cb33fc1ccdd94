"""The durable topic registry: ``<data>/topics.json``.

Rewritten whole on every change (temp file, fsync, rename, fsync of the
directory), so a crash leaves either the old registry or the new one.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from minibroker_protocol.topics import MAX_NAME_LENGTH, has_legal_chars

from .errors import InvalidPartitions, InvalidTopic, StorageError, TopicExists, UnknownTopic

CATALOG_FILE = "topics.json"
_FORMAT_VERSION = 1
MAX_TOPIC_NAME_LENGTH = MAX_NAME_LENGTH


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate; raises InvalidTopic."""
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopic(
            f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not has_legal_chars(name):
        raise InvalidTopic(
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'"
        )


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as the catalog (topics.json) keeps it."""
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)  # overrides only


class Catalog:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, CATALOG_FILE)
        self._dir = data_dir
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    @classmethod
    def load(cls, data_dir: str) -> Catalog:
        catalog = cls(data_dir)
        try:
            with open(catalog.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return catalog
        except (OSError, ValueError) as exc:
            # Never start with an empty registry over existing data.
            raise StorageError(f"{catalog.path} is unreadable: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("version") != _FORMAT_VERSION:
            raise StorageError(f"{catalog.path}: not a version {_FORMAT_VERSION} topic registry")
        try:
            for name, entry in doc["topics"].items():
                catalog._put(
                    TopicInfo(
                        name,
                        uuid.UUID(entry["topic_id"]),
                        int(entry["partitions"]),
                        {str(k): str(v) for k, v in entry.get("configs", {}).items()},
                    )
                )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StorageError(f"{catalog.path}: malformed entry: {exc!r}") from exc
        return catalog

    def _put(self, info: TopicInfo) -> None:
        old = self._topics.get(info.name)
        if old is not None:
            del self._by_id[old.topic_id]
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    # ----------------------------------------------------------------- reads

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def list(self) -> list[TopicInfo]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __len__(self) -> int:
        return len(self._topics)

    # ---------------------------------------------------------------- writes

    def create(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, object] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicExists(f"topic {name!r} already exists")
        if partitions < 1:
            raise InvalidPartitions(f"a topic needs at least one partition, got {partitions}")
        info = TopicInfo(
            name,
            topic_id or uuid.uuid4(),
            partitions,
            {str(k): str(v) for k, v in (configs or {}).items()},
        )
        self._put(info)
        self._save_or_undo(lambda: self._forget(name))
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self._require(name)
        self._forget(name)
        self._save_or_undo(lambda: self._put(info))
        return info

    def update_configs(self, name: str, configs: Mapping[str, object]) -> TopicInfo:
        """Replace the topic's config overrides."""
        old = self._require(name)
        new = TopicInfo(name, old.topic_id, old.partitions, {str(k): str(v) for k, v in configs.items()})
        self._put(new)
        self._save_or_undo(lambda: self._put(old))
        return new

    def set_partitions(self, name: str, partitions: int) -> TopicInfo:
        old = self._require(name)
        if partitions <= old.partitions:
            raise InvalidPartitions(
                f"topic {name!r} has {old.partitions} partitions; the count can only grow"
            )
        new = TopicInfo(name, old.topic_id, partitions, old.configs)
        self._put(new)
        self._save_or_undo(lambda: self._put(old))
        return new

    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopic(f"topic {name!r} does not exist")
        return info

    def _forget(self, name: str) -> None:
        info = self._topics.pop(name)
        del self._by_id[info.topic_id]

    def _save_or_undo(self, undo) -> None:
        try:
            self._save()
        except BaseException:
            undo()
            raise

    def _save(self) -> None:
        doc = {
            "version": _FORMAT_VERSION,
            "topics": {
                t.name: {"topic_id": str(t.topic_id), "partitions": t.partitions, "configs": dict(t.configs)}
                for t in self.list()
            },
        }
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
