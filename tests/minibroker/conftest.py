"""An in-process broker on a free port and a raw async client for handler tests."""

from __future__ import annotations

import asyncio
import struct

import pytest

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker_protocol import codec
from minibroker_protocol.header import read_uvarint


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.corr = 0

    @classmethod
    async def connect(cls, port: int) -> "RawClient":
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        return cls(r, w)

    def frame(self, entity, corr: int | None = None) -> bytes:
        if corr is None:
            self.corr += 1
            corr = self.corr
        body = codec.encode_request(entity, corr, "raw-test")
        return struct.pack(">i", len(body)) + body

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def recv(self, api_key: int, version: int, timeout: float = 10):
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
        data = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        corr = struct.unpack_from(">i", data)[0]
        pos = 4
        if codec.is_flexible_response(api_key, version):
            _n, pos = read_uvarint(data, pos)  # empty tagged fields
        cls = codec.response_type(api_key, version)
        from kio.serial import entity_reader
        entity, _size = entity_reader(cls)(data[pos:], 0)
        return corr, entity

    async def call(self, entity, timeout: float = 10):
        await self.send_raw(self.frame(entity))
        corr, resp = await self.recv(entity.__api_key__, entity.__version__, timeout)
        assert corr == self.corr
        return resp

    async def closed(self, timeout: float = 5) -> bool:
        try:
            data = await asyncio.wait_for(self.reader.read(), timeout)
        except (ConnectionResetError, asyncio.IncompleteReadError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionResetError, BrokenPipeError):
            pass


@pytest.fixture
async def broker(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("never"),
                 num_partitions=2, message_max_bytes=64 * 1024, max_request_bytes=1 << 20)
    running = await start(cfg)
    clients: list[RawClient] = []

    async def connect() -> RawClient:
        c = await RawClient.connect(running.port)
        clients.append(c)
        return c

    running.connect = connect
    yield running
    for c in clients:
        await c.close()
    await running.close()
