"""Kafka's error codes.

kio generates ``ErrorCode`` from Kafka's own error table; this module re-exports
it so the rest of kafkalite imports error codes from one place.
"""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "error_code"]


def error_code(value: int | ErrorCode) -> ErrorCode:
    """Coerce an int to an ErrorCode (unknown values map to UNKNOWN_SERVER_ERROR)."""
    if isinstance(value, ErrorCode):
        return value
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.unknown_server_error
