"""Configuration: sources and their precedence, Kafka names, validation, the docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cli import config_from_args, main
from broker.config import SETTINGS, BrokerConfig, ConfigError, default_of, load_config
from broker.coordinator.common import GroupConfig

ROOT = Path(__file__).resolve().parents[2]


def toml(tmp_path, text: str) -> Path:
    path = tmp_path / "kafkalite.toml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- precedence


def test_defaults_without_any_source():
    cfg = load_config(environ={})
    assert cfg == BrokerConfig()
    assert cfg.listener_specs()[0].name == "PLAINTEXT"


def test_each_source_beats_the_one_below(tmp_path):
    path = toml(tmp_path, "num_partitions = 2\ngroup_max_size = 10\nfsync = 'never'\nnode_id = 7\n")
    env = {"KAFKALITE_NUM_PARTITIONS": "3", "KAFKALITE_GROUP_MAX_SIZE": "20", "KAFKALITE_FSYNC": "always"}
    sets = ["num.partitions=4", "group.max.size=30"]
    cfg = load_config({"num_partitions": 5}, sets, path, env)
    assert cfg.num_partitions == 5  # flag > --set > env > file
    assert cfg.group_max_size == 30  # --set > env > file
    assert cfg.fsync == "always"  # env > file
    assert cfg.node_id == 7  # file > default
    cfg = load_config(None, [], path, env)
    assert (cfg.num_partitions, cfg.group_max_size) == (3, 20)


def test_cli_flags_set_env_and_config_file_together(tmp_path):
    path = toml(tmp_path, '"group.initial.rebalance.delay.ms" = 3000\nnum_partitions = 2\n')
    cfg = config_from_args(
        ["serve", "--config", str(path), "--set", "num.partitions=6", "--port", "0"],
        environ={"KAFKALITE_PORT": "1234", "KAFKALITE_NUM_PARTITIONS": "3", "KAFKALITE_AUTO_CREATE_TOPICS": "false"},
    )
    assert cfg.port == 0 and cfg.num_partitions == 6 and cfg.auto_create_topics is False
    assert cfg.group_initial_rebalance_delay_ms == 3000
    # the file can also come from KAFKALITE_CONFIG
    cfg = config_from_args(["serve"], environ={"KAFKALITE_CONFIG": str(path)})
    assert cfg.num_partitions == 2


def test_later_set_of_the_same_setting_wins():
    cfg = load_config(sets=["num.partitions=2", "num_partitions=3"], environ={})
    assert cfg.num_partitions == 3


def test_unknown_kafkalite_variables_are_not_settings():
    # other tools use the prefix too (KAFKALITE_REFERENCE_KAFKA_HOME, ...)
    assert load_config(environ={"KAFKALITE_NO_REFERENCE_KAFKA": "1"}) == BrokerConfig()


# ---------------------------------------------------------------- Kafka names


def test_kafka_names_in_toml_tables_and_set(tmp_path):
    path = toml(
        tmp_path,
        """
num.partitions = 3
auto.create.topics.enable = false
"offsets.topic.num.partitions" = 10

[group]
initial.rebalance.delay.ms = 250

[group.consumer]
heartbeat.interval.ms = 1000
session.timeout.ms = 9000

[log]
retention.ms = 60000
segment.bytes = 1048576
cleanup.policy = "compact"
dirs = "/tmp/somewhere"
""",
    )
    cfg = load_config(config_file=path, sets=["message.max.bytes=2000000", "compression.type=zstd", "node.id=3"], environ={})
    assert cfg.num_partitions == 3 and cfg.auto_create_topics is False and cfg.offsets_topic_num_partitions == 10
    assert cfg.group_initial_rebalance_delay_ms == 250
    assert cfg.group_consumer_heartbeat_interval_ms == 1000 and cfg.group_consumer_session_timeout_ms == 9000
    assert cfg.data_dir == Path("/tmp/somewhere") and cfg.node_id == 3
    d = cfg.log_defaults
    assert (d.retention_ms, d.segment_bytes, d.cleanup_policy, d.max_message_bytes) == (60000, 1048576, "compact", 2000000)
    assert d.extra == {"compression.type": "zstd"}
    g = GroupConfig.from_broker(cfg)
    assert g.group_initial_rebalance_delay_ms == 250 and g.offsets_topic_num_partitions == 10
    # the log defaults reach the storage engine with the fsync policy
    assert cfg.effective_log_defaults().retention_ms == 60000


def test_retention_forms_follow_kafkas_order():
    assert load_config(sets=["log.retention.hours=2"], environ={}).log_defaults.retention_ms == 7_200_000
    assert load_config(sets=["log.retention.hours=2", "log.retention.minutes=3"], environ={}).log_defaults.retention_ms == 180_000
    # the ms form wins even when a stronger source gives the hours form
    cfg = load_config(sets=["log.retention.hours=2"], environ={"KAFKALITE_LOG_RETENTION_MS": "5000"})
    assert cfg.log_defaults.retention_ms == 5000
    assert load_config(sets=["log.roll.hours=1"], environ={}).log_defaults.segment_ms == 3_600_000


def test_kafka_and_kafkalite_names_of_one_setting_in_one_file_clash(tmp_path):
    path = toml(tmp_path, "num_partitions = 2\n'num.partitions' = 3\n")
    with pytest.raises(ConfigError, match="already set"):
        load_config(config_file=path, environ={})


def test_listeners_by_kafka_names(tmp_path):
    path = toml(
        tmp_path,
        'listeners = ["IN://127.0.0.1:9092", "OUT://0.0.0.0:9093"]\n'
        'advertised.listeners = "OUT://kafka.example:19093"\n'
        'listener.security.protocol.map = "IN:PLAINTEXT,OUT:PLAINTEXT"\n',
    )
    specs = load_config(config_file=path, environ={}).listener_specs()
    assert [(s.name, s.host, s.port) for s in specs] == [("IN", "127.0.0.1", 9092), ("OUT", "0.0.0.0", 9093)]
    assert specs[0].advertised() == ("127.0.0.1", 9092)
    assert specs[1].advertised() == ("kafka.example", 19093)
    specs = load_config(environ={"KAFKALITE_LISTENERS": "A://[::1]:0,B://:0"}).listener_specs()
    assert [(s.host, s.port) for s in specs] == [("::1", 0), ("", 0)]
    assert specs[1].advertised(1234) == ("127.0.0.1", 1234)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "sets, message",
    [
        (["nope=1"], "unknown setting 'nope'"),
        (["num.partition=1"], "did you mean 'num.partitions'"),
        (["num.partitions=x"], "num.partitions: expected an integer"),
        (["num.partitions=0"], "below the minimum"),
        (["port=70000"], "above the maximum"),
        (["auto.create.topics.enable=maybe"], "expected true or false"),
        (["fsync=sometimes"], "expected one of always, interval, never"),
        (["log.cleanup.policy=shred"], "log.cleanup.policy"),
        (["log.retention.ms=-2"], "log.retention.ms"),
        (["log.dirs=/a,/b"], "one directory"),
        (["group.min.session.timeout.ms=10000", "group.max.session.timeout.ms=9000"], "is above group.max.session.timeout.ms"),
        (["listeners=A://h:1", "port=1"], "cannot be combined"),
        (["metrics_port=9092"], "also listener PLAINTEXT"),
        (["numpartitions"], "expected name=value"),
    ],
)
def test_invalid_settings_are_rejected_with_their_name(sets, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config(sets=sets, environ={})


def test_invalid_values_name_their_source(tmp_path):
    with pytest.raises(ConfigError, match="^KAFKALITE_GROUP_MAX_SIZE: invalid value for group.max.size"):
        load_config(environ={"KAFKALITE_GROUP_MAX_SIZE": "lots"})
    path = toml(tmp_path, "num.partitions = true\n")
    with pytest.raises(ConfigError, match=r"kafkalite.toml: num.partitions: invalid value for num.partitions: expected an integer"):
        load_config(config_file=path, environ={})
    path = toml(tmp_path, "unknown.thing = 1\n")
    with pytest.raises(ConfigError, match="unknown setting 'unknown.thing'"):
        load_config(config_file=path, environ={})
    path = toml(tmp_path, "num.partitions = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(config_file=path, environ={})
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(config_file=tmp_path / "missing.toml", environ={})


def test_cli_exits_2_with_the_message_on_stderr(tmp_path, capsys):
    for argv, message in [
        (["serve", "--set", "group.initial.rebalance.delay=5"], "unknown setting"),
        (["serve", "--config", str(tmp_path / "missing.toml")], "cannot read config file"),
        (["serve", "--set", "log.retention.ms=soon"], "log.retention.ms"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("kafkalite: ") and message in err and "Traceback" not in err


# ---------------------------------------------------------------- docs


def test_docs_list_every_setting_with_its_default_and_kafka_name():
    text = (ROOT / "docs" / "configuration.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")}
    for s in SETTINGS:
        assert s.key in rows, f"{s.key} is not in docs/configuration.md"
        row = rows[s.key]
        for name in s.kafka:
            assert f"`{name}`" in row, (s.key, name)
        assert f"`{s.env}`" in row, (s.key, s.env)
        default = default_of(s)
        if isinstance(default, (int, str)) and not isinstance(default, bool) and default != "":
            assert str(default) in row, (s.key, default)
