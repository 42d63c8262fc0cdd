"""The JSON bodies in the C++ client's captured frames (tests/vectors/cpp-client)."""

from __future__ import annotations

from rmq.protocol import FrameDecoder, RemotingCommand
from tests.conftest import VECTORS_DIR


def bodies(what: str) -> list[tuple[str, bytes]]:
    """(flow/frame, body) of every captured frame with a body that is `what` (a request name
    like "HEART_BEAT", or an answer like "resp-GET_ROUTEINFO_BY_TOPIC"), in file order."""
    out = []
    for path in sorted(VECTORS_DIR.glob(f"*/frames/*-{what}.bin")):
        if path.stem.split("-", 3)[3] != what:  # NNNN-dir-role-what
            continue
        decoder = FrameDecoder()
        decoder.feed(path.read_bytes())
        command = RemotingCommand.decode(next(iter(decoder)))
        if command.body:
            out.append((f"{path.parent.parent.name}/{path.name}", command.body))
    return out
