"""Fixtures for the harness tests: our real name server and broker (see ``tests/broker/cluster.py``).

``cluster`` is a name server and a broker on 127.0.0.1 (port 0) with a small store in
``tmp_path``; ``broker_props`` overrides broker.conf keys (parametrize it in a test).
"""

from __future__ import annotations

from tests.broker.conftest import broker_props, cluster

__all__ = ["broker_props", "cluster"]
