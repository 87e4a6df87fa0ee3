"""What ``kafkalite serve`` imports before it is ready, and the tables that let it skip the rest.

No timing here: these fail if a module that serving does not need at once
(the admin CLI, Prometheus, the handler modules, fault injection, kio message
classes, ``importlib.metadata`` through the ``crc32c`` package, the share-group
code, the transaction coordinator, the assignors' ``fractions``, OpenSSL's
hashes, the compression codecs) is imported on the way to READY, if a table
kept to avoid an import disagrees with the modules it stands for, or if what is
imported on first use is not there when first used.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs the real CLI (broker.cli.main, as ``python -m broker``); when the READY line is
# written it prints the modules loaded so far and exits.
_PROBE = r"""
import os, sys
class Tap:
    def __init__(self, f): self.f = f
    def write(self, text):
        if text.startswith("READY"):
            self.f.write("MODULES " + " ".join(sorted(k for k, v in sys.modules.items() if v is not None)) + "\n")
            self.f.flush()
            os._exit(0)
        return self.f.write(text)
    def flush(self): self.f.flush()
sys.stdout = Tap(sys.stdout)
from broker.cli import main
sys.argv = ["kafkalite", *sys.argv[1:]]
raise SystemExit(main())
"""


def _modules_at_ready(tmp_path: Path, *flags: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env = {k: v for k, v in env.items() if not k.startswith("KAFKALITE_")}
    p = subprocess.run(
        [sys.executable, "-c", _PROBE, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(tmp_path / "data"), *flags],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    lines = [line for line in p.stdout.splitlines() if line.startswith("MODULES ")]
    assert lines, f"no READY line; rc={p.returncode}\n{p.stderr[-3000:]}"
    return set(lines[0].split()[1:])


def test_serve_imports_only_what_serving_needs(tmp_path):
    mods = _modules_at_ready(tmp_path)
    assert "broker.server" in mods and "broker.handlers" in mods  # the probe did reach READY through the CLI
    unwanted = sorted(
        m for m in mods
        if m.split(".")[0] in ("prometheus_client", "hypothesis", "email")
        or m.startswith(("broker.admin", "broker.metrics", "broker.faults", "broker.testing", "broker.pytest_plugin", "importlib.metadata"))
        or (m.startswith("broker.handlers.") and m != "broker.handlers")
    )
    assert unwanted == []
    # share groups' and transactions' code: imported by the first request or record that needs it,
    # or at start once __share_group_state / __transaction_state exists
    later = sorted(m for m in mods if m.startswith(("broker.share.", "broker.coordinator.share", "protocol.group_records.share",
                                                       "protocol.share_records", "broker.txn.", "protocol.txn_records")))
    assert later == []
    assert sorted(m for m in mods if m in ("fractions", "decimal", "hashlib", "cramjam")) == []  # imported on first use
    # kio message classes are loaded when a request of their kind first arrives; only the headers are needed to listen
    kio_messages = sorted(m for m in mods if m.startswith("kio.schema.") and m.count(".") >= 3 and "_header." not in m)
    assert kio_messages == []


def test_share_and_transaction_state_on_disk_are_loaded_at_start(tmp_path):
    """A data directory with __share_group_state and __transaction_state: the start imports their
    coordinators and starts loading both before READY, as it did when they were made with the broker."""
    import asyncio

    from broker.cli import config_from_args
    from broker.server import Broker

    async def first_run() -> None:
        b = Broker(config_from_args(["serve", "--port", "0", "--data-dir", str(tmp_path / "data")], environ={}))
        await b.start()
        try:
            b.share_coordinator.ensure_started()
            b.transactions.ensure_started()
        finally:
            await b.stop()

    asyncio.run(first_run())
    assert {"__share_group_state", "__transaction_state"} <= {p.name.rsplit("-", 1)[0] for p in (tmp_path / "data").iterdir()}
    mods = _modules_at_ready(tmp_path)
    assert {"broker.share.coordinator", "broker.share.manager", "broker.txn.service"} <= mods


def test_metrics_port_still_imports_prometheus(tmp_path):
    mods = _modules_at_ready(tmp_path, "--metrics-port", "0", "--metrics-host", "127.0.0.1")
    assert "prometheus_client" in mods and "broker.metrics" in mods


def test_handler_table_matches_the_modules():
    from broker import handlers

    for name, key, api_name, versions in handlers._TABLE:
        mod = importlib.import_module(f"broker.handlers.{name}")
        assert (mod.API_KEY, mod.NAME, tuple(mod.VERSIONS)) == (key, api_name, tuple(versions)), name
    files = {p.stem for p in (ROOT / "broker" / "handlers").glob("*.py") if not p.stem.startswith("_")}
    assert files == set(handlers._MODULES), "a handler module is missing from broker.handlers._TABLE (or the table names one that is gone)"
    assert len({key for _, key, _, _ in handlers._TABLE}) == len(handlers._TABLE)


def test_handlers_mapping_answers_for_modules_not_yet_imported():
    from broker.handlers import HANDLERS, supported_versions

    keys = set(supported_versions())
    assert set(HANDLERS) == keys and len(HANDLERS) == len(keys) and set(HANDLERS.keys()) == keys
    assert all(k in HANDLERS for k in keys) and 9999 not in HANDLERS
    assert HANDLERS.get(9999) is None and HANDLERS.get(18).NAME == "ApiVersions"
    with pytest.raises(KeyError):
        HANDLERS[9999]
    assert {k: m.API_KEY for k, m in HANDLERS.items()} == {k: k for k in keys}
    assert sorted(m.NAME for m in HANDLERS.values()) == sorted(m.NAME for m in HANDLERS.values())


def test_admin_command_names_match_the_admin_cli():
    from broker import cli
    from broker.admin.cli import COMMANDS

    assert tuple(cli.ADMIN_COMMANDS) == tuple(COMMANDS)
    assert cli._parser(admin=False).format_usage() == cli._parser().format_usage()


@pytest.mark.parametrize("argv", [["serve", "--bogus"], ["serve", "--port", "x"], ["serve", "--fsync", "sometimes"], ["nope"], []])
def test_serve_usage_errors_unchanged(argv, capsys):
    from broker import cli

    with pytest.raises(SystemExit) as light:
        cli._parser(admin=False).parse_args(argv)
    light_err = capsys.readouterr().err
    with pytest.raises(SystemExit) as full:
        cli._parser().parse_args(argv)
    assert (light.value.code, light_err) == (full.value.code, capsys.readouterr().err)


def test_crc32c_is_the_package_function():
    import crc32c as package

    from protocol.crc import crc32c

    assert crc32c(b"123456789") == 0xE3069283 == package.crc32c(b"123456789")
    assert crc32c(b"abc", 5) == package.crc32c(b"abc", 5)


def test_groups_answer_load_in_progress_until_their_shard_has_loaded(tmp_path):
    """The shards load after the broker is ready; until one has, its groups get
    COORDINATOR_LOAD_IN_PROGRESS (a Heartbeat gets NONE), as Kafka answers."""
    import asyncio

    from broker.cli import config_from_args
    from broker.coordinator.common import CoordinatorError
    from broker.coordinator.runtime import ACTIVE, LOADING
    from broker.metadata_load import load_cluster
    from broker.server import Broker
    from protocol.errors import ErrorCode

    async def go() -> None:
        b = Broker(config_from_args(["serve", "--port", "0", "--data-dir", str(tmp_path / "data")], environ={}))
        load_cluster(b.cluster)
        b.coordinator.start()  # schedules the loading; nothing has run yet
        try:
            assert b.coordinator.shards and all(s.state == LOADING for s in b.coordinator.shards)
            for ask in (lambda c: c.describe_group("g"), lambda c: c.list_groups(), lambda c: c.offset_fetch("g", None, stable=False)):
                with pytest.raises(CoordinatorError) as err:
                    await ask(b.coordinator)
                assert err.value.code is ErrorCode.coordinator_load_in_progress
            assert await b.coordinator.heartbeat("g", 1, "m", None) is ErrorCode.none
            await asyncio.wait_for(b.coordinator.loaded.wait(), 60)
            assert all(s.state == ACTIVE for s in b.coordinator.shards)
            assert await b.coordinator.describe_group("g") is None
        finally:
            b.coordinator.stop()
            b.cluster.close()

    asyncio.run(go())


def test_answering_one_version_loads_no_other_version_of_the_message():
    """``build`` checks a key against the other versions of a message only when the
    class being built lacks it: the first ApiVersions v3 answer imports v3 alone."""
    code = (
        "import sys\n"
        "from protocol.codec import build, response_class\n"
        "build(response_class(18, 3), {'error_code': 0, 'api_keys': [{'api_key': 18, 'min_version': 0, 'max_version': 4}],"
        " 'throttle_time': 0, 'supported_features': [], 'finalized_features_epoch': 1, 'finalized_features': []})\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('kio.schema.api_versions.'))))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    versions = {m.split(".")[3] for m in p.stdout.split()}
    assert versions == {"v3"}


def test_a_key_of_another_version_is_still_dropped_and_a_typo_still_refused():
    from protocol.codec import UnknownFieldError, build, drop_unknown, response_class

    v0 = response_class(18, 0)
    answer = build(v0, {"error_code": 0, "api_keys": [], "throttle_time": 0, "finalized_features_epoch": 1})
    assert not hasattr(answer, "throttle_time")
    with pytest.raises(UnknownFieldError):
        build(response_class(18, 3), {"error_code": 0, "throttle_tme": 0})
    assert drop_unknown(v0, {"error_code": 0, "throttle_time": 0, "nonsense": 1}) == {"error_code": 0, "throttle_time": 0}


_SHARE_CODE = ("protocol.group_records.share", "broker.coordinator.share_group", "broker.coordinator.share")


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_a_share_record_loads_the_share_group_code_when_replayed():
    """A shard that starts without the share-group code replays a share group's records as ever:
    decoding the first one's key imports the codecs, replaying it the share-group classes."""
    from protocol.group_records import ShareGroupMetadataKey, ShareGroupMetadataValue, encode_key, encode_value

    key, value = encode_key(ShareGroupMetadataKey("sg")), encode_value(ShareGroupMetadataValue(epoch=7, metadata_hash=5))
    out = _run(
        "import asyncio, sys\n"
        "from broker.coordinator.common import GroupConfig\n"
        "from broker.coordinator.shard import GroupShard\n"
        "class Log:\n"
        "    def __getattr__(self, name): return lambda *a, **k: None\n"
        f"before = [m for m in {_SHARE_CODE!r} if m in sys.modules]\n"
        "shard = GroupShard(0, GroupConfig(), lambda: 0, Log(), asyncio.new_event_loop().create_future)\n"
        "shard.replay_bytes(" + repr(key) + ", " + repr(value) + ", committed=True)\n"
        "group = shard.groups['sg']\n"
        "print(before, type(group).__module__, type(group).__name__, group.group_epoch, group.metadata_hash)\n"
    )
    assert out.split("\n")[0] == "[] broker.coordinator.share_group ShareGroup 7 5"


def test_share_codecs_loaded_by_their_own_import_still_encode_and_decode():
    """``protocol.group_records.share`` imported directly (not through the package's names) still
    finds its records in the package's tables, both ways."""
    out = _run(
        "import protocol.group_records as g\n"
        "from protocol.group_records.share import ShareGroupMetadataKey, ShareGroupMetadataValue\n"
        "k, v = g.encode_key(ShareGroupMetadataKey('sg')), g.encode_value(ShareGroupMetadataValue(epoch=3))\n"
        "key = g.decode_key(k)\n"
        "print(key == ShareGroupMetadataKey('sg'), g.decode_value(key, v) == ShareGroupMetadataValue(epoch=3),"
        " g.VALUE_VERSIONS[ShareGroupMetadataValue], g.encode_value_version(ShareGroupMetadataValue(epoch=3), 0) == v)\n"
    )
    assert out.split() == ["True", "True", "(0,", "0)", "True"]


def test_an_unknown_record_type_is_still_unknown_once_the_share_codecs_are_tried():
    out = _run(
        "import protocol.group_records as g\n"
        "key = g.decode_key(bytes([0, 99, 0, 1]) + b'g')\n"
        "print(type(key).__name__, key.record_type)\n"
    )
    assert out.split() == ["UnknownRecordType", "99"]
