"""``kafkalite topics|groups|health``: an admin tool for any Kafka-protocol broker.

``client`` is a small synchronous Kafka client built on the project's own
protocol layer (``protocol.codec`` and ``protocol.framing``): it negotiates
versions with ApiVersions, routes group requests to the coordinator found with
FindCoordinator and partition requests to the partition leader. ``ops`` turns
answers into plain dicts (what ``--json`` prints); ``cli`` parses the command
line and prints aligned tables.
"""
