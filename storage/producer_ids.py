"""Producer id allocation that never hands out an id twice, crashes included.

Ids are reserved in blocks, as Kafka's ProducerIdManager takes blocks from the
controller: the end of the current block is made durable before the first id
of the block is used, so after any crash allocation resumes above every id
that may have been handed out. The unused rest of a block is skipped.
"""

from __future__ import annotations

import os
import struct

from .lazylog import get_logger

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"
_RECORD = struct.Struct(">hq")  # version, next unreserved id
_VERSION = 1

log = get_logger(__name__)


class ProducerIdAllocator:
    def __init__(self, data_dir: str | os.PathLike, block_size: int = BLOCK_SIZE) -> None:
        self.path = os.path.join(os.fspath(data_dir), FILE_NAME)
        self.block_size = block_size
        self._next = self._load()
        self._reserved_until = self._next  # nothing of the new run reserved yet

    def _load(self) -> int:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return 0
        if len(data) != _RECORD.size:
            raise ValueError(f"{self.path}: unexpected size {len(data)}")
        version, value = _RECORD.unpack(data)
        if version != _VERSION or value < 0:
            raise ValueError(f"{self.path}: unsupported version {version} or value {value}")
        return value

    def _reserve(self) -> None:
        until = self._next + self.block_size
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, _RECORD.pack(_VERSION, until))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self._reserved_until = until
        log.info("producer_ids.block_reserved", first=self._next, last=until - 1)

    def next_id(self) -> int:
        if self._next >= self._reserved_until:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid
