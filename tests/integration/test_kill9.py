"""kill -9 durability, bounded: bench/killnine.py with 5 restarts under load.

A confluent-kafka producer (acks=all) and a consumer group committing
synchronously load a broker child process that is SIGKILLed and restarted on
the same port and data directory five times. Every acknowledged record must
be read back at its offset with its value, and no acknowledged commit may be
above what the broker returns for the group.
"""

from __future__ import annotations

from bench import killnine


def test_acknowledged_records_and_commits_survive_kill_9(tmp_path):
    result = killnine.run(5, rate=1000, seed=9, data_dir=tmp_path)
    assert result["restarts"] == 5
    # the check had something to check
    assert result["acked_records"] > 0 and result["acked_commits"] > 0, result
    assert not result["client_errors"], result["client_errors"]
    assert result["records_lost"] == 0, result["lost_examples"]
    assert result["commits_lost"] == 0, (result["lost_commit_examples"], result["final_committed"])


def test_delete_records_and_altered_configs_survive_kill_9(tmp_path):
    """What DeleteRecords and IncrementalAlterConfigs answered is on disk before the answer:
    a SIGKILL right after finds the log start offset and the configs again."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    from tests.broker_process import BrokerProcess

    b = BrokerProcess(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("k9", 1, 1)])["k9"].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
        for i in range(20):
            p.produce("k9", b"v%d" % i, key=b"k")
        assert p.flush(30) == 0
        [fut] = admin.delete_records([TopicPartition("k9", 0, 7)]).values()
        assert fut.result(30).low_watermark == 7
        ops = {
            ConfigResource("topic", "k9"): [ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)],
            ConfigResource("group", "k9-group"): [ConfigEntry("consumer.session.timeout.ms", "55000", incremental_operation=AlterConfigOpType.SET)],
        }
        for fut in admin.incremental_alter_configs([ConfigResource(r.restype, r.name, incremental_configs=c) for r, c in ops.items()]).values():
            fut.result(30)
        b.kill()
        b.start()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "k9-reader"})
        try:
            assert c.get_watermark_offsets(TopicPartition("k9", 0), timeout=30) == (7, 20)
        finally:
            c.close()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        described = {r.name: f.result(30) for r, f in admin.describe_configs([ConfigResource("topic", "k9"), ConfigResource("group", "k9-group")]).items()}
        assert described["k9"]["retention.ms"].value == "3600000"
        assert described["k9-group"]["consumer.session.timeout.ms"].value == "55000"
    finally:
        b.stop()
