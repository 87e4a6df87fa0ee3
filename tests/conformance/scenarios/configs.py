"""Admin APIs of clients' own suites: AlterConfigs, IncrementalAlterConfigs, DescribeConfigs
(topics, groups), DeleteRecords, DescribeLogDirs and ElectLeaders.

Kafka's brokers learn of an altered config from the controller a moment after
the answer, so a describe that follows an alter waits until it shows it.
"""

from __future__ import annotations

from ..driver import Driver, record_batch
from ..registry import scenario
from ..steps import list_offsets, list_offsets_summary, produce
from .data import fetch_v12

DELETE_RECORDS, DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE_LOG_DIRS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS = 21, 32, 33, 35, 43, 44
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _incremental(d: Driver, resources: list[tuple[int, str, list[tuple[str, str | None, int]]]], validate_only: bool = False) -> list:
    body = {"resources": [{"resource_type": t, "resource_name": n, "configs": [{"name": k, "value": v, "config_operation": op} for k, v, op in ops]}
                          for t, n, ops in resources], "validate_only": validate_only}
    r = d.req(INCREMENTAL_ALTER_CONFIGS, 1, body)
    return [[x.resource_type, d.strip(x.resource_name), d.norm(x.error_code), x.error_message] for x in r.responses]


def _codes(d: Driver, resources, validate_only: bool = False) -> list:
    """As ``_incremental`` without the messages (where Kafka's wording of a bad value is its parser's)."""
    return [x[:3] for x in _incremental(d, resources, validate_only)]


def _legacy(d: Driver, resources: list[tuple[int, str, dict[str, str | None]]]) -> list:
    body = {"resources": [{"resource_type": t, "resource_name": n, "configs": [{"name": k, "value": v} for k, v in values.items()]}
                          for t, n, values in resources], "validate_only": False}
    r = d.req(ALTER_CONFIGS, 2, body)
    return [[x.resource_type, d.strip(x.resource_name), d.norm(x.error_code), x.error_message] for x in r.responses]


def _describe(d: Driver, rtype: int, name: str, keys: list[str] | None, *, version: int = 4) -> dict:
    r = d.req(DESCRIBE_CONFIGS, version, {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
                                          "include_synonyms": False, "include_documentation": False})
    [res] = r.results
    return {"error": d.norm(res.error_code), "message": res.error_message,
            "configs": {c.name: [c.value, c.config_source, c.read_only, c.is_sensitive, c.config_type] for c in res.configs}}


def _describe_until(d: Driver, rtype: int, name: str, keys: list[str], want: dict[str, str | None]) -> dict:
    def shown():
        out = _describe(d, rtype, name, keys)
        return out if all(out["configs"].get(k, [None])[0] == v for k, v in want.items()) else None

    return d.until(shown, what=f"configs of {name}")


# -- topics ---------------------------------------------------------------------------------


@scenario("configs")
def alter_topic_refusals(d: Driver):
    """IncrementalAlterConfigs/AlterConfigs refusals on topics: duplicates, nulls, unknown names, bad values, missing topics."""
    t = d.create_topic()
    missing = d.topic("missing")
    d.obs("duplicate-resources", r=_incremental(d, [(TOPIC, t, [("retention.ms", "1000", SET)])] * 2))
    d.obs("duplicate-keys", r=_incremental(d, [(TOPIC, t, [("retention.ms", "1000", SET), ("retention.ms", "2000", SET)])]))
    d.obs("null-set", r=_incremental(d, [(TOPIC, t, [("retention.ms", None, SET)])]))
    d.obs("null-legacy", r=_legacy(d, [(TOPIC, t, {"retention.ms": None})]))
    d.obs("unknown-name", r=_incremental(d, [(TOPIC, t, [("no.such.config", "1", SET)])]))
    d.obs("bad-value", r=_codes(d, [(TOPIC, t, [("retention.ms", "soon", SET)])]))
    d.obs("append-not-list", r=_incremental(d, [(TOPIC, t, [("retention.ms", "5", APPEND)])]))
    d.obs("missing-topic", r=_incremental(d, [(TOPIC, missing, [("retention.ms", "1000", SET)])]))
    d.obs("missing-topic-legacy", r=_legacy(d, [(TOPIC, missing, {"retention.ms": "1000"})]))
    d.obs("default-topic", r=_incremental(d, [(TOPIC, "", [("retention.ms", "1000", SET)])]))
    d.obs("validate-only-bad", r=_codes(d, [(TOPIC, t, [("retention.ms", "x", SET)])], validate_only=True))
    d.obs("validate-only", r=_incremental(d, [(TOPIC, t, [("retention.ms", "1000", SET)])], validate_only=True),
          describe=_describe(d, TOPIC, t, ["retention.ms"]))
    d.obs("unknown-type", r=_incremental(d, [(99, "x", [("a", "1", SET)])]))
    d.obs("other-broker", r=_incremental(d, [(BROKER, "7", [("log.retention.ms", "1000", SET)])]))


@scenario("configs")
def alter_topic_then_describe(d: Driver):
    """SET, APPEND, SUBTRACT and DELETE on a topic, then the legacy API's replacement, each seen by DescribeConfigs."""
    t = d.create_topic()
    keys = ["retention.ms", "cleanup.policy", "max.message.bytes", "segment.ms"]
    d.obs("set-append", r=_incremental(d, [(TOPIC, t, [("retention.ms", "100000", SET), ("cleanup.policy", "compact", APPEND)])]),
          describe=_describe_until(d, TOPIC, t, keys, {"retention.ms": "100000"}))
    d.obs("subtract-delete", r=_incremental(d, [(TOPIC, t, [("cleanup.policy", "delete", SUBTRACT), ("retention.ms", None, DELETE)])]),
          describe=_describe_until(d, TOPIC, t, keys, {"cleanup.policy": "compact"}))
    d.obs("legacy", r=_legacy(d, [(TOPIC, t, {"max.message.bytes": "2000", "segment.ms": "3600000"})]),
          describe=_describe_until(d, TOPIC, t, keys, {"max.message.bytes": "2000"}))


# -- groups ---------------------------------------------------------------------------------


@scenario("configs")
def group_configs(d: Driver):
    """Group configs (KIP-848): the defaults of a group never seen, SET and DELETE, and the range checks."""
    g = d.group()
    keys = ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.auto.offset.reset", "share.record.lock.duration.ms",
            "streams.num.standby.replicas"]
    defaults = _describe(d, GROUP, g, keys)
    d.obs("defaults", describe=defaults)
    d.obs("set", r=_incremental(d, [(GROUP, g, [("consumer.session.timeout.ms", "50000", SET), ("consumer.heartbeat.interval.ms", "6000", SET)])]),
          describe=_describe_until(d, GROUP, g, keys, {"consumer.session.timeout.ms": "50000"}))
    for label, ops in {
        "below-min": [("consumer.session.timeout.ms", "1", SET)],
        "above-max": [("consumer.heartbeat.interval.ms", "15001", SET)],
        "unknown": [("consumer.no.such", "1", SET)],
        "not-a-number": [("consumer.session.timeout.ms", "x", SET)],
        "session-not-above-heartbeat": [("share.session.timeout.ms", "45000", SET), ("share.heartbeat.interval.ms", "45000", SET)],
        "bad-choice": [("share.auto.offset.reset", "none", SET)],
        "append": [("consumer.session.timeout.ms", "1", APPEND)],
    }.items():
        d.obs(label, r=_codes(d, [(GROUP, g, ops)]))
    d.obs("default-group", r=_incremental(d, [(GROUP, "", [("consumer.session.timeout.ms", "50000", SET)])]))
    # the broker's session timeout (3 s here) is not above the group's 6 s interval: refused
    d.obs("delete-session-only", r=_codes(d, [(GROUP, g, [("consumer.session.timeout.ms", None, DELETE)])]))
    d.obs("delete", r=_incremental(d, [(GROUP, g, [("consumer.session.timeout.ms", None, DELETE), ("consumer.heartbeat.interval.ms", None, DELETE)])]),
          describe=_describe_until(d, GROUP, g, keys, {"consumer.session.timeout.ms": defaults["configs"]["consumer.session.timeout.ms"][0]}))
    d.obs("describe-empty-name", describe=_describe(d, GROUP, "", None))


# -- the broker ----------------------------------------------------------------------------


@scenario("configs")
def broker_cluster_default(d: Driver):
    """A cluster-wide dynamic broker config: the "" resource lists only those; a static setting is refused."""
    name = "log.cleaner.delete.retention.ms"
    try:
        d.obs("set", r=_incremental(d, [(BROKER, "", [(name, "86400001", SET)])]),
              describe=_describe_until(d, BROKER, "", [name], {name: "86400001"}))
        d.obs("node", describe=_describe_until(d, BROKER, "1", [name], {name: "86400001"}))
    finally:
        d.obs("delete", r=_incremental(d, [(BROKER, "", [(name, None, DELETE)])]))
    d.obs("after", describe=_describe_until(d, BROKER, "1", [name], {name: "86400000"}))
    d.obs("static", r=_incremental(d, [(BROKER, "1", [("node.id", "3", SET)])]))


# -- DeleteRecords --------------------------------------------------------------------------


def _delete_records(d: Driver, topic: str, partitions: dict[int, int]) -> list:
    r = d.req(DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": p, "offset": o} for p, o in partitions.items()]}],
                                  "timeout": 5000})
    return [[d.strip(t.name), p.partition_index, d.norm(p.error_code), p.low_watermark] for t in r.topics for p in t.partitions]


@scenario("configs")
def delete_records(d: Driver):
    """DeleteRecords: the low watermark moves up only, -1 is the high watermark, past it is OFFSET_OUT_OF_RANGE;
    ListOffsets EARLIEST and Fetch follow the new start."""
    t = d.create_topic(partitions=2)
    for _ in range(2):
        produce(d, t, 0, record_batch([b"v%d" % i for i in range(5)]))
    d.obs("to-4", r=_delete_records(d, t, {0: 4}))
    d.obs("back-to-2", r=_delete_records(d, t, {0: 2}))
    d.obs("past-hw", r=_delete_records(d, t, {0: 11}))
    d.obs("below-minus-1", r=_delete_records(d, t, {0: -2}))
    d.obs("missing-partition", r=_delete_records(d, t, {7: 0}))
    d.obs("missing-topic", r=_delete_records(d, d.topic("missing"), {0: 0}))
    d.obs("earliest", r=list_offsets_summary(d, list_offsets(d, t, {0: -2})))
    d.obs("fetch-below", r=fetch_v12(d, t, 0, 2))
    d.obs("fetch-at", r=fetch_v12(d, t, 0, 4))
    d.obs("to-hw", r=sorted(_delete_records(d, t, {0: -1, 1: -1})))  # Kafka's order is its hash map's
    d.obs("empty-after", r=list_offsets_summary(d, list_offsets(d, t, {0: -2, 1: -2})))


@scenario("configs")
def delete_records_compacted(d: Driver):
    """DeleteRecords on a topic whose cleanup.policy is compact only: POLICY_VIOLATION."""
    t = d.topic("compacted")
    d.req(19, 5, {"topics": [{"name": t, "num_partitions": 1, "replication_factor": 1, "configs": [{"name": "cleanup.policy", "value": "compact"}]}],
                  "timeout": 30_000})
    d.until(lambda: all(p.error_code == 0 for x in list_offsets(d, t, {0: -1}).topics for p in x.partitions), what="topic")
    d.obs("compacted", r=_delete_records(d, t, {0: 0}))


# -- DescribeLogDirs, ElectLeaders -----------------------------------------------------------


@scenario("configs")
def describe_log_dirs(d: Driver):
    """DescribeLogDirs v4 for named partitions: sizes, lags, missing partitions and topics left out."""
    t = d.create_topic(partitions=2)
    batch = record_batch([b"x" * 50] * 3, base_ts=1_700_000_000_000)
    produce(d, t, 1, batch)
    r = d.req(DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": t, "partitions": [0, 1, 9]}, {"topic": d.topic("missing"), "partitions": [0]}]})
    [res] = r.results
    d.obs("v4", error=r.error_code, dir_error=res.error_code, absolute=res.log_dir.startswith("/"), space=res.total_bytes >= res.usable_bytes > 0,
          topics=[[d.strip(x.name), sorted([p.partition_index, p.partition_size, p.offset_lag, p.is_future_key] for p in x.partitions)]
                  for x in res.topics])  # Kafka's order of partitions is its hash map's


@scenario("configs")
def elect_leaders(d: Driver):
    """ElectLeaders: ELECTION_NOT_NEEDED for an existing partition, UNKNOWN_TOPIC_OR_PARTITION for missing ones, a bad type."""
    t = d.create_topic(partitions=2)
    missing = d.topic("missing")

    def ask(election_type: int, version: int = 2):
        r = d.req(ELECT_LEADERS, version, {"election_type": election_type, "topic_partitions": [
            {"topic": t, "partitions": [1, 5]}, {"topic": missing, "partitions": [0]}], "timeout": 5000})
        return {"error": d.norm(getattr(r, "error_code", None)),
                "results": [[d.strip(x.topic), [[p.partition_id, d.norm(p.error_code), d.norm(p.error_message)] for p in x.partition_result]]
                            for x in r.replica_election_results]}

    d.obs("preferred", r=ask(0))
    d.obs("unclean", r=ask(1))
    d.obs("v0", r=ask(0, 0))


def _reassign(d: Driver, version: int, topics: list[tuple[str, list[tuple[int, list[int] | None]]]], allow: bool = True) -> dict:
    body = {"timeout": 5000, "topics": [{"name": t, "partitions": [{"partition_index": p, "replicas": r} for p, r in ps]} for t, ps in topics]}
    if version >= 1:
        body["allow_replication_factor_change"] = allow
    r = d.req(ALTER_REASSIGNMENTS, version, body)
    return {"error": d.norm(r.error_code), "message": r.error_message, "allow": getattr(r, "allow_replication_factor_change", None),
            "results": [[d.strip(x.name), [[p.partition_index, d.norm(p.error_code), p.error_message] for p in x.partitions]] for x in r.responses]}


def _listed(d: Driver, topics: list[tuple[str, list[int]]] | None) -> dict:
    body = {"timeout": 5000, "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics]}
    r = d.req(LIST_REASSIGNMENTS, 0, body)
    return {"error": d.norm(r.error_code), "topics": sorted([d.strip(x.name), [[p.partition_index, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)]
                                                                      for p in x.partitions]] for x in r.topics)}


@scenario("configs")
def alter_partition_reassignments(d: Driver):
    """AlterPartitionReassignments on one broker: the broker itself is accepted; empty, unregistered and repeated
    brokers, a cancel with nothing in progress, an unknown topic or partition are refused, at v0 and v1."""
    node = d.req(3, 12, {"topics": [], "allow_auto_topic_creation": False}).brokers[0].node_id
    t = d.create_topic(partitions=2)
    missing = d.topic("missing")
    cases = [(t, [(0, [node]), (1, None), (5, [node])]), (missing, [(0, [node])])]
    for v in (0, 1):
        d.obs(f"v{v}", r=_reassign(d, v, cases))
    d.obs("refused", r=_reassign(d, 1, [(t, [(0, []), (1, [node + 100])])]))
    d.obs("repeated", r=_reassign(d, 1, [(t, [(0, [node, node])])]))
    d.obs("rf_change_disallowed", r=_reassign(d, 1, [(t, [(0, [node]), (1, [node, node + 100])])], allow=False))


@scenario("configs")
def list_partition_reassignments(d: Driver):
    """ListPartitionReassignments: nothing in progress, for all topics, named ones and unknown ones, after a reassignment."""
    node = d.req(3, 12, {"topics": [], "allow_auto_topic_creation": False}).brokers[0].node_id
    t = d.create_topic(partitions=2)
    _reassign(d, 0, [(t, [(0, [node])])])
    d.obs("all", r=_listed(d, None))
    d.obs("named", r=_listed(d, [(t, [0, 1, 7]), (d.topic("missing"), [0])]))


@scenario("configs")
def describe_topic_synonyms(d: Driver):
    """DescribeConfigs v4 with synonyms: a topic's value set on it, and ones from the broker's defaults."""
    t = d.create_topic()
    _incremental(d, [(TOPIC, t, [("retention.ms", "100000", SET)])])
    keys = ["retention.ms", "segment.ms", "segment.bytes", "cleanup.policy", "max.message.bytes", "compression.type"]

    def shown():
        r = d.req(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": TOPIC, "resource_name": t, "configuration_keys": keys}],
                                        "include_synonyms": True, "include_documentation": False})
        [res] = r.results
        out = {c.name: [c.value, c.config_source, [[s.name, s.value, s.source] for s in c.synonyms]] for c in res.configs}
        return out if out.get("retention.ms", [None])[0] == "100000" else None

    d.obs("synonyms", configs=d.until(shown, what="the topic's configs"))
