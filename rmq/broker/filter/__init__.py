"""Message filters evaluated at the broker: tag hashes live in heartbeat.py; SQL92 here."""

from .sql92 import SqlFilter as SqlFilter
from .sql92 import SqlFilterError as SqlFilterError
from .sql92 import compile_sql92 as compile_sql92

__all__ = ["SqlFilter", "SqlFilterError", "compile_sql92"]
