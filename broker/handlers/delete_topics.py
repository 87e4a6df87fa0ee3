"""DeleteTopics (20), v1-6: by name, or by topic id from v6."""

import uuid

from protocol.errors import ErrorCode

from ..cluster import TopicError
from ..security.authorizer import Operation, ResourceType

API_KEY = 20
NAME = "DeleteTopics"
VERSIONS = (1, 6)
_ZERO_ID = uuid.UUID(int=0)


async def handle(ctx, req):
    cluster = ctx.cluster
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics or ()]
    else:
        wanted = [(name, None) for name in req.topic_names or ()]
    responses = []
    for name, topic_id in wanted:
        if topic_id is not None and topic_id != _ZERO_ID and name is None:
            topic = cluster.by_id.get(topic_id)
            missing = ErrorCode.unknown_topic_id
        else:
            topic = cluster.topics.get(name)
            missing = ErrorCode.unknown_topic_or_partition
        if ctx.broker.authorizer is not None and not ctx.allowed_on_cluster(Operation.DELETE):
            # as Kafka's ControllerApis.deleteTopics: DELETE on the topic; by name, DESCRIBE first (or
            # not even its existence is told); by id, the name only to who may DESCRIBE it
            if name is None and topic is not None and not ctx.allowed(Operation.DELETE, ResourceType.TOPIC, topic.name):
                shown = topic.name if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic.name) else None
                responses.append({"name": shown, "topic_id": topic.topic_id, "error_code": ErrorCode.topic_authorization_failed, "error_message": None})
                continue
            if name is not None and (
                not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) or (topic is not None and not ctx.allowed(Operation.DELETE, ResourceType.TOPIC, name))
            ):
                responses.append({"name": name, "topic_id": _ZERO_ID, "error_code": ErrorCode.topic_authorization_failed, "error_message": None})
                continue
        if topic is None:
            responses.append({"name": name, "topic_id": topic_id or _ZERO_ID, "error_code": missing, "error_message": None})
            continue
        try:
            cluster.delete_topic(topic)
        except TopicError as exc:  # meta.json could not be written: not deleted
            responses.append({"name": topic.name, "topic_id": topic.topic_id, "error_code": exc.code, "error_message": exc.message})
            continue
        responses.append({"name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.none, "error_message": None})
    return {"throttle_time": 0, "responses": responses}
