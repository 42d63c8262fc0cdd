"""ACL credentials for the client commands (`rmq admin` / `mqadmin`, `rmq quickstart`, `rmq bench`).

    rmq quickstart producer -n 127.0.0.1:9876 --accessKey RocketMQ --secretKey 12345678
    ROCKETMQ_ACCESS_KEY=RocketMQ ROCKETMQ_SECRET_KEY=12345678 mqadmin topicList -n 127.0.0.1:9876

The first that gives both keys wins: `--accessKey`/`--secretKey`, the environment variables
ROCKETMQ_ACCESS_KEY / ROCKETMQ_SECRET_KEY, and for mqadmin, as RocketMQ's mqadmin reads
it, `accessKey`/`secretKey` in $ROCKETMQ_HOME/conf/tools.yml. mqadmin's updateAclConfig
and deleteAccessConfig use `-a/--accessKey` and `-s/--secretKey` for the account they
change (Java's options), so there the signing keys go before the command name
(`mqadmin --accessKey ak --secretKey sk updateAclConfig ...`) or in the environment.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmq.client import MQClientError

ACCESS_KEY_ENV = "ROCKETMQ_ACCESS_KEY"
SECRET_KEY_ENV = "ROCKETMQ_SECRET_KEY"
TOOLS_FILE = Path("conf") / "tools.yml"  # under $ROCKETMQ_HOME, as RocketMQ's MixAll.ACL_CONF_TOOLS_FILE


def add_acl_arguments(parser: argparse.ArgumentParser, *, dest_prefix: str = "auth") -> None:
    """`--accessKey` / `--secretKey`, stored as `<dest_prefix>_access_key` / `_secret_key`."""
    parser.add_argument(
        "--accessKey", dest=f"{dest_prefix}_access_key", metavar="AK", help=f"ACL access key (${ACCESS_KEY_ENV})"
    )
    parser.add_argument(
        "--secretKey", dest=f"{dest_prefix}_secret_key", metavar="SK", help=f"ACL secret key (${SECRET_KEY_ENV})"
    )


def _tools_yml(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    home = environ.get("ROCKETMQ_HOME", "").strip()
    if not home:
        return None, None
    path = Path(home).expanduser() / TOOLS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None, None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MQClientError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        return None, None
    ak, sk = data.get("accessKey"), data.get("secretKey")
    return (str(ak) if ak else None), (str(sk) if sk else None)


def acl_credentials(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None, *, tools_yml: bool = False
) -> dict[str, Any]:
    """The clients' `access_key` / `secret_key` options (empty when there are no credentials).

    Raises MQClientError when only one of the two keys is given."""
    environ = os.environ if environ is None else environ
    candidates = [
        (getattr(args, "auth_access_key", None), getattr(args, "auth_secret_key", None), "--accessKey/--secretKey"),
        (getattr(args, "global_access_key", None), getattr(args, "global_secret_key", None), "--accessKey/--secretKey"),
        (
            environ.get(ACCESS_KEY_ENV) or None,
            environ.get(SECRET_KEY_ENV) or None,
            f"{ACCESS_KEY_ENV}/{SECRET_KEY_ENV}",
        ),
    ]
    for ak, sk, where in candidates:
        if ak and sk:
            return {"access_key": ak, "secret_key": sk}
        if ak or sk:
            raise MQClientError(f"{where}: give both the access key and the secret key")
    if tools_yml:
        ak, sk = _tools_yml(environ)
        if ak and sk:
            return {"access_key": ak, "secret_key": sk}
    return {}
