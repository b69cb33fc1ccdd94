"""``<partition>/verified-segments``: which ``.log`` files need no checksum pass at open.

One line per segment, ``<base offset> <size> <mtime_ns>``, recorded when the
segment was fully verified or sealed by a broker that shut down cleanly. A
segment whose size or modification time differs from its line (written to by
something else, restored from a backup, truncated) is verified again, so a
clean restart reads only the indexes while anything touched since is checked.
Bit rot that changes neither is the background scrub's job. Losing the file
costs one full verification, never correctness.
"""

from __future__ import annotations

import os

from .lazylog import get_logger

log = get_logger(__name__)

MARKS_FILE = "verified-segments"
_HEADER = "minibroker verified segments v1"


def stat_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


class VerifiedMarks:
    __slots__ = ("path", "_marks", "_dirty")

    def __init__(self, partition_dir: str) -> None:
        self.path = os.path.join(partition_dir, MARKS_FILE)
        self._marks: dict[int, tuple[int, int]] = {}
        self._dirty = False

    @classmethod
    def load(cls, partition_dir: str) -> VerifiedMarks:
        marks = cls(partition_dir)
        try:
            with open(marks.path, encoding="ascii") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return marks
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("segment.marks_unreadable", path=marks.path, reason=str(exc))
            return marks
        if not lines or lines[0] != _HEADER:
            log.warning("segment.marks_unreadable", path=marks.path, reason="unknown format")
            return marks
        for line in lines[1:]:
            parts = line.split()
            if len(parts) == 3 and all(p.isdigit() for p in parts):
                base, size, mtime = map(int, parts)
                marks._marks[base] = (size, mtime)
        return marks

    def is_verified(self, base_offset: int, log_path: str) -> bool:
        want = self._marks.get(base_offset)
        return want is not None and want == stat_key(log_path)

    def mark(self, base_offset: int, log_path: str) -> None:
        key = stat_key(log_path)
        if key is None:
            self.forget(base_offset)
        elif self._marks.get(base_offset) != key:
            self._marks[base_offset] = key
            self._dirty = True

    def forget(self, base_offset: int) -> None:
        if self._marks.pop(base_offset, None) is not None:
            self._dirty = True

    def keep_only(self, bases) -> None:
        for base in set(self._marks) - set(bases):
            self.forget(base)

    def save(self) -> None:
        """Replace the file (temp + rename; no fsync: a lost file only costs a re-check)."""
        if not self._dirty:
            return
        self._dirty = False
        if not self._marks:
            # A single-segment log has nothing to vouch for between runs.
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        body = "".join(f"{b} {s} {m}\n" for b, (s, m) in sorted(self._marks.items()))
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(_HEADER + "\n" + body)
        os.replace(tmp, self.path)

    def __contains__(self, base_offset: object) -> bool:
        return base_offset in self._marks
