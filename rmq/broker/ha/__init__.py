"""Master/slave replication over RocketMQ 4.x's HA protocol (PROTOCOL.md 9).

`master.HAService` runs on ASYNC_MASTER and SYNC_MASTER brokers, `slave.HAClient` and
`sync.SlaveSynchronize` on SLAVE brokers; the broker keeps whichever it runs as `broker.ha`.
The codec is sans-IO in rmq.protocol.ha; the store gives raw reads and raw appends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


@asynccontextmanager
async def unwrapped() -> AsyncIterator[None]:
    """Re-raise a lone exception out of a nursery's ExceptionGroup as itself, so callers can
    catch it by type (Trio's nurseries are strict)."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = []
        stack: list[BaseException] = [group]
        while stack:
            e = stack.pop()
            if isinstance(e, BaseExceptionGroup):
                stack.extend(e.exceptions)
            else:
                leaves.append(e)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
