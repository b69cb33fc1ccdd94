"""Who may authenticate, and with what: the ``--sasl-users`` file and the SCRAM credentials made
with AlterUserScramCredentials.

Two sources, as in Kafka:
- the users file plays the part of the JAAS ``user_NAME="password"`` entries of Kafka's PLAIN
  server; its users may also use SCRAM, with credentials derived from the same password (on first
  use, so a large file costs nothing at start-up);
- AlterUserScramCredentials stores salted credentials (salt, StoredKey, ServerKey, iterations:
  Kafka's UserScramCredentialRecord; the password itself never reaches the broker) in
  ``scram-credentials.json`` in the data dir. They override a file user's derived credential for
  their mechanism, and survive restarts.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from minibroker_storage.atomic_file import write_atomically
from minibroker_storage.lazylog import get_logger

from .scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, make_credential

log = get_logger("minibroker.sasl")

FILE_NAME = "scram-credentials.json"


class UsersFileError(Exception):
    """The users file cannot be read; the message is one line naming the file and line."""


def read_users_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsersFileError(f"--sasl-users {path}: {getattr(e, 'strerror', None) or e}") from None
    users: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = line.partition(":")
        if not sep or not name.strip() or not password:
            raise UsersFileError(f"--sasl-users {path}:{n}: expected name:password")
        if name.strip() in users:
            raise UsersFileError(f"--sasl-users {path}:{n}: user {name.strip()} appears twice")
        users[name.strip()] = password
    return users


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class Credentials:
    """The users a SASL listener accepts. ``data_dir`` None: nothing is stored (tests)."""

    def __init__(self, passwords: dict[str, str] | None = None, data_dir: Path | None = None) -> None:
        self.passwords = dict(passwords or {})
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        # (user, mechanism) -> credential: made with AlterUserScramCredentials
        self.stored: dict[tuple[str, str], ScramCredential] = {}
        # derived from the users file on first use
        self._derived: dict[tuple[str, str], ScramCredential] = {}
        if self.path is not None and self.path.exists():
            self._load()

    # -- lookups the mechanisms make --------------------------------------------------------
    def password(self, user: str) -> str | None:
        return self.passwords.get(user)

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        key = (user, mechanism)
        found = self.stored.get(key) or self._derived.get(key)
        if found is None and user in self.passwords:
            found = self._derived[key] = make_credential(mechanism, self.passwords[user], MIN_ITERATIONS)
        return found

    # -- DescribeUserScramCredentials / AlterUserScramCredentials --------------------------
    def described(self, user: str) -> list[tuple[str, int]]:
        """(mechanism, iterations) of each credential the user has, in mechanism order."""
        out = []
        for mechanism in MECHANISMS:
            c = self.stored.get((user, mechanism))
            if c is not None:
                out.append((mechanism, c.iterations))
            elif user in self.passwords:
                out.append((mechanism, MIN_ITERATIONS))
        return out

    def users(self) -> list[str]:
        return sorted(set(self.passwords) | {u for u, _ in self.stored})

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self.stored[(user, mechanism)] = credential
        log.info("sasl.credential_altered", user=user, mechanism=mechanism,
                 iterations=credential.iterations)

    def delete(self, user: str, mechanism: str) -> bool:
        """False when there was no stored credential (a file user's derived one stays)."""
        if self.stored.pop((user, mechanism), None) is None:
            return False
        log.info("sasl.credential_deleted", user=user, mechanism=mechanism)
        return True

    def save(self) -> None:
        if self.path is None:
            return
        doc = [{"user": u, "mechanism": m, "salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                "server_key": _b64(c.server_key), "iterations": c.iterations}
               for (u, m), c in sorted(self.stored.items())]
        write_atomically(self.path, json.dumps(doc, indent=1) + "\n", sync_dir=True)

    def _load(self) -> None:
        assert self.path is not None
        try:
            doc = json.loads(self.path.read_text())
            for e in doc:
                self.stored[(e["user"], e["mechanism"])] = ScramCredential(
                    base64.b64decode(e["salt"]), base64.b64decode(e["stored_key"]),
                    base64.b64decode(e["server_key"]), int(e["iterations"]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            # A damaged file must not stop the broker from starting: its users cannot log in
            # with SCRAM until they are made again, and the operator is told why.
            log.error("sasl.credentials_unreadable", file=str(self.path), error=str(e),
                      reason="SCRAM credentials made with AlterUserScramCredentials are ignored")
            self.stored.clear()
