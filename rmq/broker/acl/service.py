"""PlainAcl: the broker's ACL 1.0, the plain_acl.yml it reads, and the check every request passes.

    acl = PlainAcl(path)          # reads the file now; AclConfigError if it is unusable
    Dispatcher(hook=acl.hook)     # every request is checked before its processor runs
    await nursery.start(acl.watch)  # re-read the file when it changes

The file is looked at every WATCH_INTERVAL seconds (its size, mtime and inode); when it
changed and its content did too, it is parsed again. A file that does not parse, or says
something unusable, is logged once with the reason and ignored: the last good one stays
in force. The admin requests (rmq.broker.acl.processor) change the file the way RocketMQ
does: read it, change the mapping, bump `dataVersion`, write it back (atomically here),
and use the new model at once.

A refused request is answered SYSTEM_ERROR with "AclException: <why>" as the remark, as a
RocketMQ 4.x broker answers; each (client address, reason) pair is logged once at WARNING
level, later repeats at DEBUG, so a misconfigured client cannot flood the log.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from rmq.protocol import RemotingCommand, ResponseCode, code_name
from rmq.protocol.acl import AclConfigBody, PlainAccessConfig
from rmq.protocol.bodies.configs import DataVersion
from rmq.store import wall_clock_ms

from ..jsonfile import write_atomic
from .addresses import AddressPatternError, client_ip, parse_pattern
from .model import (
    ACCOUNTS,
    DATA_VERSION,
    GLOBAL_WHITE_ADDRS,
    Account,
    AclConfigError,
    AclModel,
    dump_yaml,
    load_yaml,
    parse_acl,
    parse_perm,
    parse_resource_perms,
)
from .validator import AclDenied, check

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

log = logging.getLogger("rmq.broker.acl")

WATCH_INTERVAL = 2.0  # seconds between looks at the file
REFUSALS_REMEMBERED = 4096  # (address, reason) pairs logged at WARNING level, oldest forgotten first


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class PlainAcl:
    """See the module docstring. `clock_ms` stamps data versions; `require_signed_code`
    refuses signed requests whose code their signature does not cover (validator.check)."""

    def __init__(
        self, path: Path, *, clock_ms: Callable[[], int] = wall_clock_ms, require_signed_code: bool = False
    ) -> None:
        self.path = path
        self.clock_ms = clock_ms
        self.require_signed_code = require_signed_code  # aclRequireSignedRequestCode
        self.model = AclModel()
        self.version = DataVersion(clock_ms())
        self._stat: tuple[int, int, int] | None = None
        self._digest = b""
        self._bad_digest = b""
        self._refusals: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._load_first()

    # -- the file --------------------------------------------------------------------------

    def _load_first(self) -> None:
        if not self.path.exists():
            if not self.path.parent.is_dir():
                raise AclConfigError(f"the ACL file {self.path} does not exist, nor does its directory")
            # as RocketMQ does: an empty file, so accounts can be added with mqadmin
            self.path.touch()
            log.warning("ACL file %s did not exist: created it empty; only white-listed addresses get in", self.path)
        try:
            self._reload(first=True)
        except AclConfigError as exc:
            raise AclConfigError(f"ACL file {self.path}: {exc}") from None

    def _read(self) -> tuple[bytes, tuple[int, int, int] | None]:
        stat = _stat_key(self.path)
        try:
            return self.path.read_bytes(), stat
        except OSError as exc:
            raise AclConfigError(f"cannot read it: {exc.strerror or exc}") from None

    def _reload(self, *, first: bool = False) -> bool:
        """Parse the file if its content changed; True when a new model is in force."""
        data, stat = self._read()
        self._stat = stat
        digest = hashlib.sha256(data).digest()
        if digest == self._digest and not first:
            return False
        model = parse_acl(load_yaml(data))
        self._digest = digest
        self._install(model, reloaded=not first)
        return True

    def _install(self, model: AclModel, *, reloaded: bool) -> None:
        if model.data_version is not None:
            self.version = model.data_version
        elif reloaded:
            self.version = self.version.next(self.clock_ms())
        self.model = model
        self._refusals.clear()
        log.info(
            "ACL %s %s: %d account(s), %d global white-list pattern(s)",
            self.path,
            "reloaded" if reloaded else "loaded",
            len(model.accounts),
            len(model.global_white),
        )

    def poll(self) -> None:
        """Re-read the file if it changed (the watch loop calls this). Never raises."""
        if _stat_key(self.path) == self._stat:
            return
        try:
            self._reload()
        except AclConfigError as exc:
            data_digest = self._digest_of_file()
            if data_digest != self._bad_digest:  # log each bad version of the file once
                self._bad_digest = data_digest
                log.error("ACL file %s is not usable, the previous one stays in force: %s", self.path, exc)

    def _digest_of_file(self) -> bytes:
        try:
            return hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return b"missing"

    async def watch(
        self, interval: float | None = None, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Poll the file every `interval` (default WATCH_INTERVAL) seconds until cancelled."""
        task_status.started()
        while True:
            await trio.sleep(WATCH_INTERVAL if interval is None else interval)
            self.poll()

    def _write(self, data: dict[str, Any]) -> None:
        """Bump the data version into `data`, write it, and put it in force. AclConfigError if unusable."""
        version = self.version.next(self.clock_ms())
        data[DATA_VERSION] = [{"counter": version.counter, "timestamp": version.timestamp}]
        model = parse_acl(data)  # refuse before writing what could not be read back
        text = dump_yaml(data).encode("utf-8")
        try:
            write_atomic(self.path, text)
        except OSError as exc:
            raise AclConfigError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self._stat = _stat_key(self.path)
        self._digest = hashlib.sha256(text).digest()
        self._install(model, reloaded=True)

    def _current_data(self) -> dict[str, Any]:
        """The file's mapping as it is now on disk (a hand edit not yet polled included)."""
        try:
            data, _ = self._read()
            return dict(load_yaml(data))
        except AclConfigError:
            return dict(self.model.data)

    # -- the check -------------------------------------------------------------------------

    def hook(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """The dispatcher hook: None lets the request through, else the refusal to answer."""
        ip = client_ip(ctx.remote_address)
        try:
            check(self.model, request, ip, signed_code=self.require_signed_code)
        except AclDenied as exc:
            reason = str(exc)
            self.log_refusal(ip, code_name(request.code, response=False), reason)
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"AclException: {reason}")
        return None

    def log_refusal(self, ip: str, name: str, reason: str) -> None:
        """Log a refused request `name` (a request code's, an RPC's) once per address and reason."""
        key = (ip, reason)
        if key in self._refusals:
            self._refusals.move_to_end(key)
            log.debug("ACL refused %s from %s: %s", name, ip, reason)
            return
        self._refusals[key] = None
        if len(self._refusals) > REFUSALS_REMEMBERED:
            self._refusals.popitem(last=False)
        log.warning("ACL refused %s from %s: %s (logged once per address and reason)", name, ip, reason)

    # -- the admin requests ----------------------------------------------------------------

    def update_account(self, config: PlainAccessConfig) -> None:
        """Create the account, or change the given fields of an existing one (UPDATE_AND_CREATE_ACL_CONFIG).

        As in RocketMQ, `admin` is always set; fields left None keep their value."""
        # the same checks as RocketMQ's checkPlainAccessConfig and checkResourcePerms, before any write
        ak = config.access_key
        if len(ak or "") < 7 or len(config.secret_key or "") < 7:
            raise AclConfigError(f"The accessKey={ak} and secretKey cannot be null and length should longer than 6")
        parse_resource_perms(config.topic_perms, groups=False, owner=repr(ak))
        parse_resource_perms(config.group_perms, groups=True, owner=repr(ak))
        for what, perm in (
            ("defaultTopicPerm", config.default_topic_perm),
            ("defaultGroupPerm", config.default_group_perm),
        ):
            if perm:
                parse_perm(perm, f"account {ak!r}: {what}")
        data = self._current_data()
        accounts = [dict(a) for a in (data.get(ACCOUNTS) or []) if isinstance(a, dict)]
        fresh = config.to_json()
        for account in accounts:
            if str(account.get("accessKey")) == ak:
                account.update(
                    {k: v for k, v in fresh.items() if not (k in ("defaultTopicPerm", "defaultGroupPerm") and not v)}
                )
                break
        else:
            accounts.append(fresh)
        data[ACCOUNTS] = accounts
        self._write(data)
        log.info("ACL account %s %s", ak, "updated" if ak in self.model.accounts else "created")

    def delete_account(self, access_key: str) -> bool:
        """Remove the account (DELETE_ACL_CONFIG); False when there is none."""
        data = self._current_data()
        accounts = [a for a in (data.get(ACCOUNTS) or []) if isinstance(a, dict)]
        kept = [a for a in accounts if str(a.get("accessKey")) != access_key]
        if len(kept) == len(accounts):
            return False
        data[ACCOUNTS] = kept
        self._write(data)
        log.info("ACL account %s deleted", access_key)
        return True

    def update_global_white_addrs(self, addrs: list[str], file: str | None = None) -> None:
        """Replace globalWhiteRemoteAddresses (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)."""
        if file and Path(file).expanduser().resolve() != self.path.resolve():
            raise AclConfigError(f"this broker's ACL file is {self.path}, not {file}")
        for pattern in addrs:
            try:
                parse_pattern(pattern)
            except AddressPatternError as exc:
                raise AclConfigError(str(exc)) from None
        data = self._current_data()
        data[GLOBAL_WHITE_ADDRS] = list(addrs)
        self._write(data)
        log.info("ACL global white list set to %s", addrs)

    def accounts(self) -> list[Account]:
        return list(self.model.accounts.values())

    def config_body(self) -> AclConfigBody:
        """GET_BROKER_CLUSTER_ACL_CONFIG's body: white list and accounts, secrets included."""
        return AclConfigBody(list(self.model.global_white_addrs), [a.config for a in self.model.accounts.values()])

    def versions(self) -> dict[str, DataVersion]:
        """File path → its data version (RocketMQ 4.9 may read several files; this broker reads one)."""
        return {os.fspath(self.path): self.version}
