"""AlterConfigs (33), v0-2: replace the values of a topic, group or broker resource.

Checked and applied as Kafka 4.x's broker and controller do (broker/handlers/_configs.py):
duplicate resources or keys and null values are INVALID_REQUEST, ALTER_CONFIGS is needed on
the topic, group or cluster, unknown names and bad values are INVALID_CONFIG, a missing topic is
UNKNOWN_TOPIC_OR_PARTITION, and validate_only checks without changing anything. Values are
kept in meta.json and take effect at once.
"""

from ._configs import alter

API_KEY = 33
NAME = "AlterConfigs"
VERSIONS = (0, 2)


async def handle(ctx, req):
    return alter(ctx, req, incremental=False)
