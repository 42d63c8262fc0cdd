"""DLedger's peer lists (no Trio: configs read them)."""

from __future__ import annotations


def parse_peers(text: str) -> dict[str, str]:
    """DLedger's peers, "n0-127.0.0.1:40911;n1-127.0.0.1:40912" → {id: "host:port"}; ValueError
    names a bad item."""
    peers: dict[str, str] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        ident, sep, addr = part.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not ident or not colon or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ValueError(f"bad item {part!r}, want id-host:port")
        peers[ident] = addr
    return peers
