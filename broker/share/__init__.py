"""Share groups' data plane (KIP-932): the share coordinator and the share partitions."""

SHARE_STATE_TOPIC = "__share_group_state"  # named here so that a start can look for it without importing the rest
