"""Share groups' data plane (KIP-932): the share coordinator and the share partitions."""

