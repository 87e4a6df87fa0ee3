"""What changed between Apache Kafka 4.1 and 4.4 that a client can see, and what kafkalite does.

Rendered into docs/compatibility.md by ``report.py``. Found by running the suite
against both releases (``make test`` and ``make test-conformance-4.1``; their
report.json files keep every observation), by comparing the ApiVersions answers of
a 4.1.0 and a 4.4.0 broker, the message schemas in their kafka-clients jars and
their group-coordinator settings, and by the upgrade notes and KIPs.
Each row: (API, Kafka 4.1, Kafka 4.4, kafkalite).
"""

INTRO = [
    "Found by running the suite against both releases and comparing their observations, by comparing",
    "the ApiVersions answers of a 4.1.0 and a 4.4.0 broker and the message schemas in their",
    "kafka-clients jars, and from the 4.2-4.4 upgrade notes and KIPs. A single combined KRaft node",
    "starts with the same settings on both (no new required setting); `group.coordinator.rebalance.protocols`",
    "is deprecated in 4.4 (the `group.version`, `share.version` and `streams.version` features decide).",
    "Rows marked *known difference* name the scenario that shows them.",
]

CHANGES: list[tuple[str, str, str, str]] = [
    ("ApiVersions (18)", "v0-4",
     "v0-5 (KIP-1242: the request may name the cluster id and node id it expects; REBOOTSTRAP_REQUIRED)",
     "v0-4: kio 0.6.5 has no v5 schema (*known difference* `data.api_versions_ranges`, `data.api_versions_unsupported_version`)"),
    ("ApiVersions: finalized features",
     "group.version 1, transaction.version 2, eligible.leader.replicas.version 1, metadata.version 27",
     "adds share.version 2 and streams.version 1 (share groups, KIP-932, and the streams rebalance protocol, KIP-1071, "
     "production-ready since 4.2 and on by default); metadata.version 33",
     "group.version 1, share.version 2 (share groups: their group coordinator side, [share-groups.md](share-groups.md)), "
     "transaction.version 2: no streams groups"),
    ("ListOffsets (2)", "v1-10",
     "v1-11 (KIP-1023: timestamp -6, earliest pending upload; -1 without tiered storage)",
     "v1-11, -6 answers -1 (nothing is tiered). As both releases: a special timestamp below the version that "
     "brought it (-3 < v7, -4 < v8, -5 < v9, -6 < v11) or an unknown negative one is UNSUPPORTED_VERSION for "
     "its partition (kafkalite answered NONE before)"),
    ("OffsetCommit (8)", "v2-9 (v10 defined but unstable, not advertised)",
     "v2-10 (topic ids instead of names)",
     "v2-10: an unknown topic id is UNKNOWN_TOPIC_ID per partition, as 4.4 (scenario `commit.topic_ids_v10`)"),
    ("OffsetFetch (9)", "v1-9 (v10 unstable)", "v1-10 (topic ids instead of names)",
     "v1-10: an unknown topic id is UNKNOWN_TOPIC_ID per partition; a fetch of all topics answers by id"),
    ("OffsetCommit in a consumer (KIP-848) group (TxnOffsetCommit not compared)",
     "the member epoch must equal the member's current epoch, else STALE_MEMBER_EPOCH",
     "KIP-1251 assignment epochs: accepted when the partition's assignment epoch ≤ the request's epoch ≤ the "
     "member's epoch, so a member one epoch behind may commit the partitions it held before the bump",
     "as 4.4: each member keeps its partitions' assignment epochs (kept while it holds them, new ones at its new "
     "epoch) and writes them as 4.4 does (tagged field 0 of the current assignment's topics); records without "
     "them load at the member's epoch (scenario `kip848.commit_with_previous_epoch`)"),
    ("ConsumerGroupHeartbeat (68): a member that revoked and must revoke more",
     "moves to its epoch + 1 (KAFKA-16249)", "stays at its epoch", "as 4.4"),
    ("ConsumerGroupHeartbeat (68): a partition the member is itself revoking, back in its target",
     "unreleased until the member's next heartbeat", "given back as soon as the member acknowledges the revocation "
     "(KAFKA-19449)", "as 4.4"),
    ("Group coordinator writes: `group.coordinator.append.linger.ms`", "5 ms by default",
     "-1 by default: adaptive, the batch closes once the queued operations have run (KAFKA-19826)",
     "as 4.4 (-1: the flush is queued behind the callbacks the event loop already has)"),
    ("TxnOffsetCommit (28)", "v0-5", "v0-6 (KIP-1319: topic ids instead of names)",
     "v0-5: kio 0.6.5 has no v6 schema"),
    ("DeleteGroups (42)", "v0-2", "v0-3 (an error message per group)", "v0-2: kio 0.6.5 has no v3 schema"),
    ("DescribeLogDirs (35)", "v1-4", "v1-5 (IsCordoned, KIP-1066 cordoned log directories)",
     "v1-4 (v5 not served yet)"),
    ("ConsumerGroupHeartbeat (68): a new group",
     "starts at epoch 0; the first member's join makes it epoch 1, the first assignment's epoch",
     "starts at epoch 1 with an empty target assignment of epoch 1 (KAFKA-20268); the first computed "
     "assignment is epoch 2, and a first member that subscribes to nothing stays at 1",
     "as 4.4 (every KIP-848 scenario's epochs are one higher than against 4.1)"),
    ("ConsumerGroupHeartbeat (68): the last member leaves or is fenced",
     "the group epoch moves, the target assignment epoch stays",
     "the (empty) target assignment moves to the new group epoch at once",
     "as 4.4"),
    ("ConsumerGroupHeartbeat (68): target assignment timing",
     "computed in the heartbeat that changed the group",
     "computed at most once per `group.consumer.assignment.interval.ms` (1 s by default), on a background thread "
     "(`group.consumer.assignor.offload.enable`, true): a new or changed group is Assigning for up to a second",
     "at most once per `group.consumer.assignment.interval.ms` (1 s by default; the group config "
     "`consumer.assignment.interval.ms` too), at the first heartbeat after the interval or by a timer at its end, "
     "on the event loop (no offload); the suite runs both sides with the interval at 0"),
    ("DescribeConfigs (32) of a group", "every config not set on the group: source DEFAULT_CONFIG",
     "a value that comes from the broker's own group.* setting: STATIC_BROKER_CONFIG",
     "as 4.4, where the broker's value differs from the config's own default (kafkalite cannot tell a setting "
     "given at its default from one left alone)"),
    ("AlterConfigs / IncrementalAlterConfigs (33, 44) of a static broker setting",
     "INVALID_REQUEST \"Cannot update these configs dynamically: Set(node.id)\"",
     "the same, written [node.id]", "as 4.4"),
    ("ShareGroupHeartbeat (76), ShareGroupDescribe (77)", "v1", "v1; group configs share.delivery.count.limit, "
     "share.partition.max.record.locks, share.renew.acknowledge.enable, share.assignment.interval.ms (KIP-1263: target "
     "assignments at most once a second by default)",
     "v1, as 4.4 (scenarios `share.*`; the suite runs 4.4 with the share assignment interval at 0 and offload off, as for "
     "consumer groups; kafkalite honours the interval)"),
    ("ShareFetch (78), ShareAcknowledge (79)", "v1", "v1-2", "not on this branch (the share coordinator and ShareFetch are separate work)"),
    ("StreamsGroupHeartbeat (88), StreamsGroupDescribe (89)", "not advertised (unstable v0)", "v0-1",
     "streams groups are not implemented"),
    ("StreamsGroupTopologyDescriptionUpdate (93)", "absent", "v0", "not implemented"),
    ("WriteShareGroupState (85), ReadShareGroupStateSummary (87), DescribeShareGroupOffsets (90)", "v0", "v0-1",
     "not implemented (share groups)"),
    ("WriteTxnMarkers (27), AddRaftVoter (80), UnregisterController (94, new)", "v1; v0; absent",
     "v1-2 (KIP-1228 transaction version per marker); v0-1; v0",
     "not served: inter-broker and KRaft controller APIs"),
]
