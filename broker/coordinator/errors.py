"""The coordinator's one error channel: exceptions in, error codes out.

Shard code raises ``CoordinatorError(code, message)``; the runtime raises it
for a shard that is loading or gone and for a failed append (an ``OSError``
from storage). ``for_exception`` is the only place that turns any of them
into the code a client sees, normalised as Kafka's
``GroupCoordinatorService.handleOperationException`` does, so a storage or
replication failure never leaks a code a group client does not expect.
Anything else is a broker bug: it is not mapped here, it propagates to the
connection, which logs it and reports it to ``Broker.on_handler_error``.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

from .common import CoordinatorError

# what Kafka's group coordinator service answers instead of these codes
_NORMALISED = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
    ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,
}


def for_exception(exc: BaseException) -> tuple[ErrorCode, str | None]:
    """The (code, message) a client sees for a coordinator failure. Raises ``exc`` if it is a bug."""
    if isinstance(exc, CoordinatorError):
        code = exc.code
        mapped = _NORMALISED.get(code)
        if mapped is not None:
            return mapped, None
        message = str(exc)
        return code, (None if message == code.name else message)
    if isinstance(exc, OSError):  # storage: the log cannot be written
        return ErrorCode.not_coordinator, None
    raise exc


def error_code(exc: BaseException) -> ErrorCode:
    return for_exception(exc)[0]
