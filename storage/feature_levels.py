"""``feature-levels``: the finalized feature levels and their epoch, as UpdateFeatures left them.

Kafka keeps these as FeatureLevelRecords in its metadata log; a single-process broker keeps one
small properties file in the data dir, replaced atomically, so a level changed at runtime
survives a restart. A file that cannot be read is reported, never fatal: the broker then starts
at its default levels.
"""

from __future__ import annotations

from pathlib import Path

from .atomic_file import write_atomically

FILE = "feature-levels"
EPOCH_KEY = "features.epoch"


class FeatureLevelsError(ValueError):
    """The file exists but does not hold levels and an epoch."""


def load(data_dir: Path) -> tuple[dict[str, int], int] | None:
    """(levels, epoch) from the data dir, or None when no level was ever changed."""
    path = Path(data_dir) / FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise FeatureLevelsError(f"{path}: {e}") from None
    levels: dict[str, int] = {}
    epoch = None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        try:
            number = int(value.strip())
        except ValueError:
            raise FeatureLevelsError(f"{path}:{n}: not name=integer: {line!r}") from None
        if not sep:
            raise FeatureLevelsError(f"{path}:{n}: not name=integer: {line!r}")
        if key.strip() == EPOCH_KEY:
            epoch = number
        else:
            levels[key.strip()] = number
    if epoch is None:
        raise FeatureLevelsError(f"{path}: no {EPOCH_KEY}")
    return levels, epoch


def save(data_dir: Path, levels: dict[str, int], epoch: int) -> None:
    body = "".join(f"{k}={v}\n" for k, v in sorted(levels.items())) + f"{EPOCH_KEY}={epoch}\n"
    write_atomically(Path(data_dir) / FILE,
                     "# finalized feature levels (UpdateFeatures); minibroker rewrites this file\n" + body)
