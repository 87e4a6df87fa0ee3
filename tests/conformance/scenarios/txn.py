"""Transactions on the wire: the coordinator's answers and errors, and what read_committed sees."""

from __future__ import annotations

import datetime

from ..driver import Driver, record_batch
from ..registry import scenario
from ..steps import FETCH, FIND_COORDINATOR, fetch_offsets, fetch_summary, list_offsets, list_offsets_summary, ms

INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_COMMIT, PRODUCE = 22, 24, 25, 26, 28, 0
TRANSACTIONAL = 0x10


def find(d: Driver, tid: str) -> dict:
    """FindCoordinator for a transactional id, until it is available (the first lookup makes __transaction_state)."""
    def ask():
        r = d.req(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]})
        return r if r.coordinators[0].error_code == 0 else None

    r = d.until(ask, what="a transaction coordinator")
    return {"error": r.coordinators[0].error_code}


def init(d: Driver, tid: str, *, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1, version: int = 4):
    """InitProducerId, retried while the coordinator answers a retriable error (loading, concurrent transactions)."""
    body = {"transactional_id": tid, "transaction_timeout": ms(timeout_ms), "producer_id": pid, "producer_epoch": epoch}

    def ask():
        r = d.req(INIT, version, body)
        return None if r.error_code in (14, 15, 16, 51) else r  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS

    return d.until(ask, what="InitProducerId")


def start(d: Driver, partitions: int = 1, **init_args) -> tuple[str, str, int, int]:
    """A fresh topic and transactional id, its coordinator found, its producer initialized: (topic, id, pid, epoch)."""
    t = d.create_topic("t", partitions)
    tid = d.topic("tx")
    find(d, tid)
    r = init(d, tid, **init_args)
    return t, tid, r.producer_id, r.producer_epoch


def add_partitions(d: Driver, tid: str, pid: int, epoch: int, topics: dict[str, list[int]], *, version: int = 3):
    body = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    return d.req(ADD_PARTITIONS, version, body)


def add_summary(d: Driver, r) -> list:
    return sorted([d.strip(t.name), p.partition_index, d.norm(p.partition_error_code)] for t in r.results_by_topic_v3_and_below for p in t.results_by_partition)


def end(d: Driver, tid: str, pid: int, epoch: int, commit: bool, *, version: int = 4):
    return d.req(END_TXN, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit})


def produce_txn(d: Driver, tid: str, topic: str, partition: int, pid: int, epoch: int, seq: int, values: list[bytes], *, version: int = 11):
    batch = record_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, attributes=TRANSACTIONAL)
    r = d.req(PRODUCE, version, {"transactional_id": tid, "acks": -1, "timeout": ms(10_000),
                                 "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    return r.responses[0].partition_responses[0].error_code


def stable_end(d: Driver, topic: str, partition: int) -> list:
    """ListOffsets LATEST under READ_COMMITTED once it equals the log end (the markers are written after EndTxn's answer)."""
    def settled():
        committed = list_offsets_summary(d, list_offsets(d, topic, {partition: -1}, isolation=1))
        uncommitted = list_offsets_summary(d, list_offsets(d, topic, {partition: -1}, isolation=0))
        return committed if committed == uncommitted else None

    return d.until(settled, what="the last stable offset to reach the log end")


def committed_fetch(topic: str, partition: int, max_wait_ms: int = 0) -> dict:
    """A READ_COMMITTED Fetch v12 of one partition from offset 0."""
    return {
        "replica_id": -1, "max_wait": datetime.timedelta(milliseconds=max_wait_ms), "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 1, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                                    "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }


def fetch_committed(d: Driver, topic: str, partition: int) -> dict:
    r = d.req(FETCH, 12, committed_fetch(topic, partition))
    p = r.responses[0].partitions[0]
    aborted = sorted(a.first_offset for a in (p.aborted_transactions or ()))
    return {"error": d.norm(p.error_code), "hw": p.high_watermark, "lso": p.last_stable_offset, "aborted_first_offsets": aborted,
            "bytes": len(p.records or b"") > 0}


@scenario("txn")
def commit_then_abort(d: Driver):
    """A committed transaction, then an aborted one: epochs, errors, LSO, aborted_transactions under READ_COMMITTED."""
    t = d.create_topic("t", 1)
    tid = d.topic("tx")
    d.obs("find", **find(d, tid))
    r = init(d, tid)
    pid, epoch = r.producer_id, r.producer_epoch
    d.obs("init", error=r.error_code, epoch=epoch)
    d.obs("add", partitions=add_summary(d, add_partitions(d, tid, pid, epoch, {t: [0]})))
    d.obs("produce", error=produce_txn(d, tid, t, 0, pid, epoch, 0, [b"a", b"b"]))
    d.obs("end-commit", error=end(d, tid, pid, epoch, True).error_code)
    d.obs("lso-1", offsets=stable_end(d, t, 0))
    d.obs("add-2", partitions=add_summary(d, d.until(lambda: _added(d, tid, pid, epoch, t), what="the next transaction to start")))
    d.obs("produce-2", error=produce_txn(d, tid, t, 0, pid, epoch, 2, [b"c"]))
    d.obs("fetch-open", **fetch_committed(d, t, 0))
    d.obs("end-abort", error=end(d, tid, pid, epoch, False).error_code)
    d.obs("lso-2", offsets=stable_end(d, t, 0))
    d.obs("fetch-done", **fetch_committed(d, t, 0))


def _added(d: Driver, tid: str, pid: int, epoch: int, topic: str):
    r = add_partitions(d, tid, pid, epoch, {topic: [0]})
    return None if any(p.partition_error_code == 51 for t in r.results_by_topic_v3_and_below for p in t.results_by_partition) else r


@scenario("txn")
def coordinator_errors(d: Driver):
    """Unknown transactional id, wrong epoch, EndTxn with nothing open, a timeout above the maximum, an unknown partition."""
    t = d.create_topic("t", 1)
    tid = d.topic("tx")
    find(d, tid)
    d.obs("add-unknown-id", partitions=add_summary(d, add_partitions(d, d.topic("nobody"), 1234, 0, {t: [0]})))
    d.obs("init-timeout-too-large", error=d.req(INIT, 4, {"transactional_id": tid, "transaction_timeout": ms(900_001),
                                                              "producer_id": -1, "producer_epoch": -1}).error_code)
    r = init(d, tid)
    pid, epoch = r.producer_id, r.producer_epoch
    d.obs("end-empty", error=end(d, tid, pid, epoch, True).error_code)
    d.obs("add-wrong-epoch-v3", partitions=add_summary(d, add_partitions(d, tid, pid, epoch + 1, {t: [0]})))
    d.obs("add-wrong-epoch-v1", partitions=add_summary(d, add_partitions(d, tid, pid, epoch + 1, {t: [0]}, version=1)))
    d.obs("add-unknown-partition", partitions=add_summary(d, add_partitions(d, tid, pid, epoch, {t: [0, 7], d.topic("missing"): [0]})))
    d.obs("end-wrong-pid", error=end(d, tid, pid + 1, epoch, True).error_code)


@scenario("txn")
def second_producer_fences_the_first(d: Driver):
    """InitProducerId again with the same transactional id: a bumped epoch; the old epoch is fenced."""
    t = d.create_topic("t", 1)
    tid = d.topic("tx")
    find(d, tid)
    first = init(d, tid)
    d.obs("add-first", partitions=add_summary(d, add_partitions(d, tid, first.producer_id, first.producer_epoch, {t: [0]})))
    second = init(d, tid)  # the open transaction is aborted first (CONCURRENT_TRANSACTIONS meanwhile, retried)
    d.obs("init-second", error=second.error_code, same_pid=second.producer_id == first.producer_id, epoch_step=second.producer_epoch - first.producer_epoch)
    d.obs("end-first-v4", error=end(d, tid, first.producer_id, first.producer_epoch, True).error_code)
    d.obs("end-first-v1", error=end(d, tid, first.producer_id, first.producer_epoch, True, version=1).error_code)
    d.obs("produce-first", error=produce_txn(d, tid, t, 0, first.producer_id, first.producer_epoch, 0, [b"z"]))


@scenario("txn")
def transactional_offsets_wait_for_the_commit(d: Driver):
    """TxnOffsetCommit after AddOffsetsToTxn: UNSTABLE_OFFSET_COMMIT for require_stable while pending, the offset after commit."""
    t = d.create_topic("t", 1)
    tid, g = d.topic("tx"), d.group()
    find(d, tid)
    r = init(d, tid)
    pid, epoch = r.producer_id, r.producer_epoch
    body = {"transactional_id": tid, "group_id": g, "producer_id": pid, "producer_epoch": epoch, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                                            "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    r = d.req(TXN_COMMIT, 3, body)
    d.obs("txn-commit-without-add", errors=[d.norm(p.error_code) for tt in r.topics for p in tt.partitions])
    d.obs("add-offsets", error=d.req(ADD_OFFSETS, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": g}).error_code)
    r = d.req(TXN_COMMIT, 3, body)
    d.obs("txn-commit", errors=[d.norm(p.error_code) for tt in r.topics for p in tt.partitions])
    d.obs("fetch-stable", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]}, require_stable=True)))
    d.obs("fetch-plain", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]})))
    d.obs("end", error=end(d, tid, pid, epoch, True).error_code)
    d.obs("fetch-after", groups=d.until(lambda: _committed(d, g, t), what="the transaction's offset"))


def _committed(d: Driver, g: str, t: str):
    s = fetch_summary(d, fetch_offsets(d, g, {t: [0]}, require_stable=True))
    return s if "5" in repr(s) and "UNSTABLE" not in repr(s) else None


@scenario("txn")
def describe_and_list_transactions(d: Driver):
    """DescribeTransactions, ListTransactions (state filters, an unknown state) and DescribeProducers through a transaction."""
    t, tid, pid, epoch = start(d, 2)

    def described(label: str, ids: list[str] | None = None) -> None:
        s = d.req(65, 0, {"transactional_ids": ids or [tid, d.topic("nobody")]}).transaction_states
        d.obs(label, states=[{"id": d.strip(x.transactional_id), "error": d.norm(x.error_code), "state": x.transaction_state,
                              "timeout": x.transaction_timeout, "epoch": x.producer_epoch, "pid_matches": x.producer_id == pid,
                              "topics": sorted([d.strip(tt.topic), sorted(tt.partitions)] for tt in x.topics)} for x in s])

    def listed(label: str, states: list[str]) -> None:
        r = d.req(66, 1, {"state_filters": states, "producer_id_filters": [pid], "duration_filter": -1})
        d.obs(label, error=r.error_code, unknown=sorted(r.unknown_state_filters),
              found=sorted([d.strip(x.transactional_id), x.transaction_state] for x in r.transaction_states))

    # not the Empty one: Kafka sends its start time as -1, which kio cannot decode (kafkalite sends 0: docs/transactions.md)
    described("describe-unknown", [d.topic("nobody")])
    listed("list-empty", [])
    add_partitions(d, tid, pid, epoch, {t: [0, 1]})
    produce_txn(d, tid, t, 1, pid, epoch, 0, [b"x"])
    described("describe-ongoing")
    listed("list-ongoing", ["Ongoing", "NoSuchState"])
    listed("list-completecommit", ["CompleteCommit"])
    r = d.req(61, 0, {"topics": [{"name": t, "partition_indexes": [1]}]})
    p = r.topics[0].partitions[0]
    d.obs("producers", error=p.error_code, producers=[{"pid_matches": x.producer_id == pid, "epoch": x.producer_epoch, "last_sequence": x.last_sequence,
                                                       "txn_start": x.current_txn_start_offset} for x in p.active_producers])
    end(d, tid, pid, epoch, True)
    stable_end(d, t, 1)
    d.until(lambda: d.req(65, 0, {"transactional_ids": [tid]}).transaction_states[0].transaction_state == "CompleteCommit", what="CompleteCommit")
    described("describe-done")


# ---------------------------------------------------------------- transactions V2 (KIP-890 part 2)


def _described(d: Driver, tid: str) -> dict:
    (x,) = d.req(65, 0, {"transactional_ids": [tid]}).transaction_states
    return {"error": d.norm(x.error_code), "state": x.transaction_state, "epoch": x.producer_epoch,
            # a group's __consumer_offsets partition follows its (per-broker) name: only how many
            "topics": sorted([d.strip(tt.topic), len(tt.partitions) if tt.topic == "__consumer_offsets" else sorted(tt.partitions)]
                             for tt in x.topics)}


def _until_state(d: Driver, tid: str, state: str) -> dict:
    return d.until(lambda: (lambda s: s if s["state"] == state else None)(_described(d, tid)), what=f"the transaction to reach {state}")


@scenario("txn")
def v2_produce_adds_partitions_and_every_end_bumps_the_epoch(d: Driver):
    """Produce v12 adds its partition (v11 only verifies); EndTxn v5 answers the next epoch; a batch of the
    finished epoch is fenced; the next transaction starts at sequence 0; read_committed hides the aborted one."""
    t = d.create_topic("t", 3)
    tid = d.topic("tx")
    find(d, tid)
    r = init(d, tid, version=5)
    pid, epoch = r.producer_id, r.producer_epoch
    d.obs("init", error=r.error_code, epoch=epoch)
    d.obs("produce-v12-p0", error=d.norm(produce_txn(d, tid, t, 0, pid, epoch, 0, [b"a"], version=12)))
    d.obs("produce-v12-p1", error=d.norm(produce_txn(d, tid, t, 1, pid, epoch, 0, [b"b"], version=12)))
    d.obs("produce-v11-p2", error=d.norm(produce_txn(d, tid, t, 2, pid, epoch, 0, [b"never"], version=11)))
    d.obs("described", **_described(d, tid))
    e = end(d, tid, pid, epoch, True, version=5)
    d.obs("end-commit", error=e.error_code, same_pid=e.producer_id == pid, epoch_step=e.producer_epoch - epoch)
    d.obs("lso-1", offsets=stable_end(d, t, 0))
    d.obs("complete", **_until_state(d, tid, "CompleteCommit"))
    d.obs("zombie", error=d.norm(produce_txn(d, tid, t, 0, pid, epoch, 1, [b"zombie"], version=12)))
    epoch = e.producer_epoch
    d.obs("produce-next", error=d.norm(produce_txn(d, tid, t, 0, pid, epoch, 0, [b"c"], version=12)))
    a = end(d, tid, pid, epoch, False, version=5)
    d.obs("end-abort", error=a.error_code, epoch_step=a.producer_epoch - epoch)
    d.obs("lso-2", offsets=stable_end(d, t, 0))
    d.obs("fetch-done", **fetch_committed(d, t, 0))
    d.obs("aborted", **_until_state(d, tid, "CompleteAbort"))


@scenario("txn")
def v2_txn_offset_commit_adds_the_offsets_partition(d: Driver):
    """TxnOffsetCommit v5 without AddOffsetsToTxn (v4 still needs it): pending until EndTxn v5 commits it."""
    t = d.create_topic("t", 1)
    tid, g = d.topic("tx"), d.group()
    find(d, tid)
    r = init(d, tid, version=5)
    pid, epoch = r.producer_id, r.producer_epoch
    body = {"transactional_id": tid, "group_id": g, "producer_id": pid, "producer_epoch": epoch, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                                            "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    r = d.req(TXN_COMMIT, 4, body)
    d.obs("txn-commit-v4-without-add", errors=[d.norm(p.error_code) for tt in r.topics for p in tt.partitions])
    r = d.req(TXN_COMMIT, 5, body)
    d.obs("txn-commit-v5", errors=[d.norm(p.error_code) for tt in r.topics for p in tt.partitions])
    d.obs("described", **_described(d, tid))
    d.obs("fetch-stable", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]}, require_stable=True)))
    e = end(d, tid, pid, epoch, True, version=5)
    d.obs("end", error=e.error_code, epoch_step=e.producer_epoch - epoch)
    d.obs("fetch-after", groups=d.until(lambda: _committed(d, g, t), what="the transaction's offset"))


@scenario("txn")
def v2_end_txn_edges(d: Driver):
    """EndTxn v5 from Empty (abort allowed, commit not), a retried end with the old epoch, an end with an old epoch after that."""
    t, tid, pid, epoch = start(d, version=5)
    c = end(d, tid, pid, epoch, True, version=5)
    d.obs("commit-empty", error=c.error_code)
    a = end(d, tid, pid, epoch, False, version=5)
    d.obs("abort-empty", error=a.error_code, epoch_step=a.producer_epoch - epoch)
    d.obs("after-abort-empty", **_until_state(d, tid, "CompleteAbort"))
    epoch = a.producer_epoch
    produce_txn(d, tid, t, 0, pid, epoch, 0, [b"x"], version=12)
    e = end(d, tid, pid, epoch, True, version=5)
    d.obs("commit", error=e.error_code, epoch_step=e.producer_epoch - epoch)
    _until_state(d, tid, "CompleteCommit")
    retry = end(d, tid, pid, epoch, True, version=5)
    d.obs("commit-retried", error=retry.error_code, epoch_step=retry.producer_epoch - epoch)
    wrong = end(d, tid, pid, epoch, False, version=5)
    d.obs("abort-with-old-epoch", error=wrong.error_code)
    d.obs("end-v4-new-epoch", error=end(d, tid, pid, e.producer_epoch, True, version=4).error_code)


@scenario("txn")
def a_transaction_past_its_timeout_is_aborted(d: Driver):
    """A 1 s transaction left open: aborted by the coordinator (epoch fenced), its data hidden, the producer fenced."""
    t, tid, pid, epoch = start(d, timeout_ms=1000)
    add_partitions(d, tid, pid, epoch, {t: [0]})
    d.obs("produce", error=produce_txn(d, tid, t, 0, pid, epoch, 0, [b"late"]))
    d.obs("aborted", **_until_state(d, tid, "CompleteAbort"))
    d.obs("lso", offsets=stable_end(d, t, 0))
    d.obs("fetch", **fetch_committed(d, t, 0))
    d.obs("end-after-timeout", error=d.norm(end(d, tid, pid, epoch, True).error_code))
    d.obs("produce-after-timeout", error=d.norm(produce_txn(d, tid, t, 0, pid, epoch, 1, [b"later"])))


@scenario("txn")
def a_read_committed_long_poll_is_answered_when_the_marker_lands(d: Driver):
    """A READ_COMMITTED Fetch waiting at the last stable offset of an open transaction (nothing visible) is
    answered with the records once the COMMIT marker is written, well before its max wait."""
    t, tid, pid, epoch = start(d)
    add_partitions(d, tid, pid, epoch, {t: [0]})
    produce_txn(d, tid, t, 0, pid, epoch, 0, [b"a", b"b"])
    poll = d.conn("poll")
    poll.send(FETCH, 12, committed_fetch(t, 0, max_wait_ms=8000))
    d.obs("waiting", answered_early=poll.ready(0.5))
    d.obs("end", error=end(d, tid, pid, epoch, True).error_code)
    answered = poll.ready(6.0)
    p = poll.recv().responses[0].partitions[0] if answered else None
    d.obs("answered", before_max_wait=answered, error=d.norm(p.error_code) if p else None, lso=p.last_stable_offset if p else None,
          records=len(p.records or b"") > 0 if p else None)
