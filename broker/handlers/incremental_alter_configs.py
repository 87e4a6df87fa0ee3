"""IncrementalAlterConfigs (44), v0-1: edit the values of a topic, group or broker resource (SET, DELETE, APPEND, SUBTRACT).

Checked and applied as Kafka 4.x's broker and controller do (broker/handlers/_configs.py):
duplicate resources or keys and null values are INVALID_REQUEST, ALTER_CONFIGS is needed on
the topic, group or cluster, unknown names and bad values are INVALID_CONFIG, a missing topic is
UNKNOWN_TOPIC_OR_PARTITION, and validate_only checks without changing anything. Values are
kept in meta.json and take effect at once.
"""

from ._configs import alter

API_KEY = 44
NAME = "IncrementalAlterConfigs"
VERSIONS = (0, 1)


async def handle(ctx, req):
    return alter(ctx, req, incremental=True)
