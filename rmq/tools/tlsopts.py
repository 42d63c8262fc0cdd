"""`--tls` and `--tls-config` for the client commands (`rmq admin`, `rmq quickstart`, `rmq bench`).

    rmq quickstart producer -n 127.0.0.1:9876 --tls                        # the system's CAs
    rmq quickstart producer -n 127.0.0.1:9876 --tls-config tls.properties  # RocketMQ's tls.client.* keys

`--tls` connects with TLS and verifies the server against the system's CAs. `--tls-config
FILE` reads a tls.properties file (`tls.client.trustCertPath`, `tls.client.certPath`,
`tls.client.keyPath`, `tls.client.keyPassword`, `tls.client.authServer`); the connection
uses TLS when `--tls` is given too or when the file says `tls.enable=true`.
"""

from __future__ import annotations

import argparse

from rmq.client import MQClientError, TlsClientSettings
from rmq.remoting.tlsconfig import TlsConfigError


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tls", action="store_true", help="connect with TLS, verifying the server (tls.enable)")
    parser.add_argument(
        "--tls-config",
        metavar="FILE",
        help="tls.properties with RocketMQ's tls.client.* keys (trustCertPath, certPath, keyPath, authServer)",
    )


def tls_option(args: argparse.Namespace) -> bool | TlsClientSettings:
    """The clients' `tls` option from the parsed `--tls` / `--tls-config`. Raises MQClientError
    when the file cannot be read."""
    path = getattr(args, "tls_config", None)
    enabled = bool(getattr(args, "tls", False))
    if not path:
        return enabled
    try:
        settings = TlsClientSettings.load(path)
    except TlsConfigError as exc:
        raise MQClientError(f"--tls-config: {exc}") from None
    return settings if enabled or settings.enable else False
