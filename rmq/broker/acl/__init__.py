"""ACL 1.0: accounts, permissions and white lists from plain_acl.yml, checked before any processor.

`PlainAcl` (service.py) holds the file's model, re-reads the file when it changes and
is the dispatcher hook; `validator.check` decides one request; `model` and `addresses`
read the file's content; `AclProcessor` serves the ACL admin requests (codes 50-54).
The signature itself is sans-IO in rmq.protocol.acl, shared with the client.
"""

from __future__ import annotations

from .model import AclConfigError, AclModel, parse_acl
from .processor import AclProcessor
from .service import PlainAcl
from .validator import ADMIN_CODES, AclDenied, authenticate, authorize, check

__all__ = [
    "ADMIN_CODES",
    "AclConfigError",
    "AclDenied",
    "AclModel",
    "AclProcessor",
    "PlainAcl",
    "authenticate",
    "authorize",
    "check",
    "parse_acl",
]
