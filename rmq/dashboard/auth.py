"""Login for the dashboard, as rocketmq-dashboard's `users.properties`: one `name=password`
per line, `,1` after the password for an administrator; `#` starts a comment."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
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
