"""The ACL admin requests (AdminBrokerProcessor's ACL part, PROTOCOL.md 8).

    code                                 header / body                           failure code
    50 UPDATE_AND_CREATE_ACL_CONFIG      CreateAccessConfigRequestHeader          209
    51 DELETE_ACL_CONFIG                 DeleteAccessConfigRequestHeader          210
    52 GET_BROKER_CLUSTER_ACL_INFO       answer: GetBrokerAclConfigResponseHeader 1
    53 UPDATE_GLOBAL_WHITE_ADDRS_CONFIG  UpdateGlobalWhiteAddrsConfigRequestHeader 211
    54 GET_BROKER_CLUSTER_ACL_CONFIG     answer body: globalWhiteAddrs, plainAccessConfigs (4.6-4.8)

On a broker without `aclEnable=true` each is answered with its failure code and a
remark saying so. Who may send them is the validator's business (50, 51, 53 and 54 are
admin-only).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    PlainAccessConfig,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    split_list,
)

from .model import AclConfigError

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts
    from .service import PlainAcl

log = logging.getLogger("rmq.broker.acl")

_FAILURE: dict[int, int] = {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    RequestCode.DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ResponseCode.SYSTEM_ERROR,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ResponseCode.SYSTEM_ERROR,
}


class AclProcessor:
    CODES = tuple(_FAILURE)

    def __init__(self, broker: BrokerParts, acl: PlainAcl | None) -> None:
        self.broker = broker
        self.acl = acl  # None: aclEnable=false

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        acl = self.acl
        failure = _FAILURE[request.code]
        if acl is None:
            return request.make_response(failure, "ACL is not enabled on this broker (aclEnable=false in broker.conf)")
        code = request.code
        try:
            if code == RequestCode.UPDATE_AND_CREATE_ACL_CONFIG:
                header = CreateAccessConfigRequestHeader.from_ext(request.ext_fields)
                acl.update_account(PlainAccessConfig.from_header(header))
            elif code == RequestCode.DELETE_ACL_CONFIG:
                ak = DeleteAccessConfigRequestHeader.from_ext(request.ext_fields).access_key
                log.info("DeleteAccessConfig called by %s", ctx.remote_address)
                if not acl.delete_account(ak):
                    remark = f"The accesskey[{ak}] corresponding to accessConfig has been deleted failed."
                    return request.make_response(failure, remark + " (no such account)")
            elif code == RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG:
                wh = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext(request.ext_fields)
                acl.update_global_white_addrs(split_list(wh.global_white_addrs) or [], wh.acl_file_full_path)
            elif code == RequestCode.GET_BROKER_CLUSTER_ACL_INFO:
                return self._version_info(request)
            else:
                return request.make_response(ResponseCode.SUCCESS, None, body=json_body.dumps(acl.config_body()))
        except AclConfigError as exc:
            log.warning("%s from %s failed: %s", RequestCode(code).name, ctx.remote_address, exc)
            return request.make_response(failure, str(exc))
        return request.make_response(ResponseCode.SUCCESS)

    def _version_info(self, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        acl = self.acl
        assert acl is not None
        versions = {path: v.to_json() for path, v in acl.versions().items()}
        header = GetBrokerAclConfigResponseHeader(
            version=json.dumps(acl.version.to_json(), separators=(",", ":")),
            broker_name=broker.config.broker_name,
            broker_addr=broker.address,
            cluster_name=broker.config.broker_cluster_name,
            all_acl_file_version=json.dumps(versions, separators=(",", ":")),
        )
        return request.make_response(ResponseCode.SUCCESS, None, header.to_ext())
