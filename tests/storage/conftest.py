import pytest

from minibroker_storage import LogConfig, PartitionLog

from .batches import TS0


class Clock:
    def __init__(self, now: int = TS0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def small_config() -> LogConfig:
    return LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)


@pytest.fixture
def open_log(tmp_path, clock, small_config):
    """open_log(config=None) -> PartitionLog in tmp_path/t-0; closed at teardown."""
    opened = []

    def _open(config: LogConfig | None = None, name: str = "t-0") -> PartitionLog:
        log = PartitionLog.open(str(tmp_path / name), config or small_config, clock=clock)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log.closed:
            log.close()

