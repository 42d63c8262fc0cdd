"""Login for the dashboard, as rocketmq-dashboard's `users.properties`: one `name=password`
per line, `,1` after the password for an administrator; `#` starts a comment."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


class UsersFileError(ValueError):
    """The users file cannot be read or has a line that is not `name=password[,1]`."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password: str
    admin: bool


def load_users(path: str | Path) -> dict[str, User]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsersFileError(f"cannot read users file {path}: {exc.strerror}") from None
    users: dict[str, User] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, sep, rest = line.partition("=")
        password, _, flag = rest.partition(",")
        if not sep or not name.strip() or not password.strip():
            raise UsersFileError(f"{path}:{n}: expected name=password[,1], got {line!r}")
        users[name.strip()] = User(name.strip(), password.strip(), flag.strip() == "1")
    if not users:
        raise UsersFileError(f"{path}: no users")
    return users


def check(users: dict[str, User], name: str, password: str) -> User | None:
    user = users.get(name)
    if user is None or not hmac.compare_digest(user.password.encode(), password.encode()):
        return None
    return user


@dataclass
class Throttle:
    """Failed logins per client address: after `free` failures each further try must wait,
    `base` seconds doubling up to `cap`; a successful login clears the count. Guessing a
    password from one address becomes slow without locking anyone out for long."""

    free: int = 5
    base: float = 30.0
    cap: float = 900.0
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict)  # key -> (count, until)

    def wait(self, key: str) -> float:
        """Seconds before `key` may try again (0: now)."""
        _, until = self._failures.get(key, (0, 0.0))
        return max(0.0, until - self.clock())

    def failed(self, key: str) -> None:
        count = self._failures.get(key, (0, 0.0))[0] + 1
        delay = 0.0 if count < self.free else min(self.cap, self.base * 2 ** (count - self.free))
        self._failures[key] = (count, self.clock() + delay)
        if len(self._failures) > 10_000:  # forget addresses whose wait is over
            now = self.clock()
            self._failures = {k: v for k, v in self._failures.items() if v[1] > now}

    def succeeded(self, key: str) -> None:
        self._failures.pop(key, None)
