"""ConsumerGroupHeartbeat (68), v0-1: the KIP-848 consumer protocol.

Request validation happens here, as in Kafka's service layer (INVALID_REQUEST
with a message, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION); the rest is
``broker/coordinator/consumer.py`` on the group's shard.
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import HeartbeatParams
from ..pending import Pending, settle
from ._groups import client_host, coordinator, ms

from ..security.authorizer import Operation, ResourceType

API_KEY = 68
NAME = "ConsumerGroupHeartbeat"
VERSIONS = (0, 1)


def _invalid(req, code: ErrorCode, message: str) -> dict:
    # as Kafka: an error answer carries no member id and epoch 0
    return {"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


def validate(ctx, req) -> tuple[ErrorCode, str] | None:
    v = ctx.version
    epoch = req.member_epoch
    regex = getattr(req, "subscribed_topic_regex", None)
    if not req.member_id and (v >= 1 or epoch > 0 or epoch == -1):
        return ErrorCode.invalid_request, "MemberId can't be empty."
    if not req.group_id:
        return ErrorCode.invalid_request, "GroupId can't be empty."
    if req.instance_id is not None and not req.instance_id:
        return ErrorCode.invalid_request, "InstanceId can't be empty."
    if req.rack_id is not None and not req.rack_id:
        return ErrorCode.invalid_request, "RackId can't be empty."
    if epoch == 0:
        if ms(req.rebalance_timeout) == -1:
            return ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request."
        if req.topic_partitions is None or len(req.topic_partitions) > 0:
            return ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
        if req.subscribed_topic_names is None and regex is None:
            return ErrorCode.invalid_request, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif epoch == -2:
        if req.instance_id is None:
            return ErrorCode.invalid_request, "InstanceId can't be null."
    elif epoch < -2:
        return ErrorCode.invalid_request, f"MemberEpoch is invalid: {epoch}"
    assignors = coordinator(ctx).config.group_consumer_assignors
    if req.server_assignor is not None and req.server_assignor not in assignors:
        return ErrorCode.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}."
    if regex:
        try:
            ctx.cluster.metadata.compile(regex)
        except ValueError as exc:
            return ErrorCode.invalid_regular_expression, f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}."
    return None


def begin(ctx, req):
    """The answer, or a Pending of it (``broker/pending.py``): reads ``ctx`` only here."""
    if ctx.broker.authorizer is not None and not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id or ""):
        return {**_invalid(req, ErrorCode.group_authorization_failed, None)}
    problem = validate(ctx, req)
    if problem is not None:
        return _invalid(req, *problem)
    owned = None
    if req.topic_partitions is not None:
        owned = {tp.topic_id: frozenset(tp.partitions) for tp in req.topic_partitions if tp.partitions}
    params = HeartbeatParams(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=ms(req.rebalance_timeout),
        subscribed_topic_names=None if req.subscribed_topic_names is None else list(req.subscribed_topic_names),
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor,
        owned=owned,
        version=ctx.version,
        client_id=ctx.request.client_id or "",
        client_host=client_host(ctx),
    )
    try:
        body = coordinator(ctx).begin_consumer_group_heartbeat(params)
    except CoordinatorError as exc:
        return _invalid(req, exc.code, exc.message)
    if type(body) is Pending:
        return body.then(lambda get: _answer(req, get))
    return {"throttle_time": 0, **body}


def _answer(req, get) -> dict:
    try:
        body = get()
    except CoordinatorError as exc:
        return _invalid(req, exc.code, exc.message)
    return {"throttle_time": 0, **body}


async def handle(ctx, req):
    return await settle(begin(ctx, req))
