"""White-list address patterns, as RocketMQ's RemoteAddressStrategyFactory reads them.

    pattern                       matches
    (empty)                       nothing
    *  *.*.*.*  *:*:*:*:*:*:*:*   every address
    192.168.0.{1,2,3}             the listed last parts (IPv6: 1050::{a,b})
    192.168.0.1,192.168.0.2       the listed addresses (IPv4 or IPv6)
    192.168.*.*  192.168.1.1-10   the first part that is `*` or `a-b` is a range; the
                                  parts before it must equal; the parts after are not looked at
    1050:0:0:0:5:600:300c:*       the same for IPv6 (hexadecimal ranges, `*` only last)
    192.168.1.2  ::1              one address

`parse_pattern` raises AddressPatternError for a pattern RocketMQ would refuse; the
returned strategy's `match(ip)` takes the client's IP (no port).
"""

from __future__ import annotations

import abc
import ipaddress
from dataclasses import dataclass


class AddressPatternError(ValueError):
    """A white-list pattern that cannot be read; the message names it."""


def _split(text: str, sep: str) -> list[str]:
    """StringUtils.split: empty tokens dropped."""
    return [t for t in text.split(sep) if t]


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_ip(address: str, parts: int) -> str:
    """AclUtils.expandIP: upper case, `::` widened to `parts` groups, groups padded to 4 digits.

    An IPv4 address comes back as it is (upper-cased: digits and dots only)."""
    address = address.upper()
    pad = parts - address.count(":")
    if pad > 0:
        address = address.replace("::", ":" * (pad + 1))
    return ":".join(g if len(g) >= 4 else g.rjust(4, "0") for g in address.split(":"))


def client_ip(address: str) -> str:
    """The IP of a peer address "ip:port" (IPv6 maybe bracketed); IPv4-mapped IPv6 as IPv4."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    host = host.strip("[]")
    if host.lower().startswith("::ffff:") and _is_ipv4(host[7:]):
        return host[7:]
    return host


class AddressStrategy(abc.ABC):
    """Whether a client IP is white-listed by one pattern (one subclass per pattern form)."""

    pattern: str

    @abc.abstractmethod
    def match(self, ip: str) -> bool: ...


@dataclass(frozen=True)
class _Nothing(AddressStrategy):
    pattern: str = ""

    def match(self, ip: str) -> bool:
        return False


@dataclass(frozen=True)
class _Everything(AddressStrategy):
    pattern: str = "*"

    def match(self, ip: str) -> bool:
        return True


@dataclass(frozen=True)
class _Set(AddressStrategy):
    pattern: str
    addresses: frozenset[str]

    def match(self, ip: str) -> bool:
        if _is_ipv6(ip):
            ip = expand_ip(ip, 8)
        return ip in self.addresses


@dataclass(frozen=True)
class _One(AddressStrategy):
    pattern: str
    expanded: str

    def match(self, ip: str) -> bool:
        return expand_ip(ip, 8).upper() == self.expanded


@dataclass(frozen=True)
class _Range(AddressStrategy):
    pattern: str
    head: str
    index: int  # which part (0-based) holds the range
    start: int
    end: int
    v6: bool

    def match(self, ip: str) -> bool:
        if not self.v6 and _is_ipv4(ip):
            if not ip.startswith(self.head):
                return False
            value = ip.split(".")[self.index]
            return self.start <= int(value) <= self.end
        if self.v6 and _is_ipv6(ip):
            full = expand_ip(ip, 8).upper()
            if not full.startswith(self.head):
                return False
            return self.start <= int(full[5 * self.index : 5 * self.index + 4], 16) <= self.end
        return False


def _listed(pattern: str, addresses: list[str]) -> _Set:
    out = set()
    for address in addresses:
        address = address.strip()
        if _is_ipv4(address):
            out.add(address)
        elif _is_ipv6(address):
            out.add(expand_ip(address, 8))
        else:
            raise AddressPatternError(f"{address!r} in white-list pattern {pattern!r} is not an IP address")
    return _Set(pattern, frozenset(out))


def _braces(pattern: str) -> _Set:
    sep = ":" if ":" in pattern else "."
    parts = _split(pattern, sep)
    if sep == "." and len(parts) < 4:
        raise AddressPatternError(f"white-list pattern {pattern!r} needs four parts, like 192.168.0.{{1,2}}")
    last = parts[-1]
    if not last.startswith("{"):
        raise AddressPatternError(f"white-list pattern {pattern!r}: only the last part may be a {{list}}")
    prefix = pattern[: pattern.index("{")]
    return _listed(pattern, [prefix + item for item in _split(last[1:-1], ",")])


def _range_bounds(pattern: str, value: str, top: int, base: int) -> tuple[int, int] | None:
    value = value.strip()
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    if value.startswith("-"):
        raise AddressPatternError(f"white-list pattern {pattern!r}: bad range {value!r}")
    bounds = _split(value, "-")
    try:
        start, end = (int(b, base) for b in bounds)
    except ValueError:
        raise AddressPatternError(f"white-list pattern {pattern!r}: bad range {value!r}") from None
    if not (0 <= start <= end <= top):
        raise AddressPatternError(f"white-list pattern {pattern!r}: range {value!r} is not start-end within 0-{top}")
    return start, end


def _range_v4(pattern: str) -> _Range:
    parts = _split(pattern, ".")
    if len(parts) != 4:
        raise AddressPatternError(f"white-list pattern {pattern!r} needs four parts, like 192.168.*.*")
    for index in (1, 2, 3):
        bounds = _range_bounds(pattern, parts[index], 255, 10)
        if bounds is not None:
            for fixed in parts[:index]:
                if not (fixed.strip().isdigit() and 0 <= int(fixed) <= 255):
                    raise AddressPatternError(f"white-list pattern {pattern!r}: {fixed!r} is not 0-255")
            head = "".join(p.strip() + "." for p in parts[:index])
            return _Range(pattern, head, index, *bounds, v6=False)
    raise AddressPatternError(f"white-list pattern {pattern!r}: the first part cannot be a range")


def _range_v6(pattern: str) -> _Range:
    star, minus = pattern.find("*"), pattern.find("-")
    if star > -1 and star != len(pattern) - 1:
        raise AddressPatternError(f"white-list pattern {pattern!r}: '*' may only end an IPv6 pattern")
    if minus > -1:
        last_colon = pattern.rfind(":")
        limit = last_colon if star == -1 else pattern.rfind(":", 0, last_colon)
        if minus <= limit:
            raise AddressPatternError(f"white-list pattern {pattern!r}: the range must be the last IPv6 group")
    parts = _split(pattern, ":")
    for index in range(1, len(parts)):
        bounds = _range_bounds(pattern, parts[index], 0xFFFF, 16)
        if bounds is not None:
            if star > -1 and minus > -1:
                sub, width = pattern[: pattern.rfind(":", 0, pattern.rfind(":"))], 6
            else:
                sub, width = pattern[: pattern.rfind(":")], 7
            head = expand_ip(sub, width)
            if not all(len(g) == 4 and all(c in "0123456789ABCDEF" for c in g) for g in head.split(":")):
                raise AddressPatternError(f"white-list pattern {pattern!r} is not an IPv6 prefix")
            return _Range(pattern, head, len(_split(head, ":")), *bounds, v6=True)
    raise AddressPatternError(f"white-list pattern {pattern!r}: no range in it")


def parse_pattern(pattern: str | None) -> AddressStrategy:
    """The strategy for one white-list pattern (see the module docstring)."""
    if pattern is None or not pattern.strip():
        return _Nothing()
    pattern = pattern.strip()
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _Everything(pattern)
    if pattern.endswith("}"):
        return _braces(pattern)
    if "," in pattern:
        return _listed(pattern, _split(pattern, ","))
    if "*" in pattern or "-" in pattern:
        return _range_v6(pattern) if ":" in pattern else _range_v4(pattern)
    if not (_is_ipv4(pattern) or _is_ipv6(pattern)):
        raise AddressPatternError(f"white-list pattern {pattern!r} is not an IP address or pattern")
    return _One(pattern, expand_ip(pattern, 8).upper())
