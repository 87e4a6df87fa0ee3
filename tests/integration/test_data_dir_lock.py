"""The data directory's lock (broker/datadir.py): a second broker on a directory in use is
refused before it touches it, in every start path; a start refused for a port in use
leaves its directory untouched; ``--data-dir`` naming a file gets one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.datadir import LOCK_FILE, DataDirError
from broker.testing import Broker, BrokerThread
from tests.broker_process import ROOT, BrokerProcess

# 20 in make test; the 100 of issue 24's target with KAFKALITE_LOCK_ATTEMPTS=100 (about 4 minutes on a loaded machine)
ATTEMPTS = int(os.environ.get("KAFKALITE_LOCK_ATTEMPTS", "20"))

# the two ways a broker process starts: `python -m broker` and the `kafkalite` console script
# (which calls broker.cli.main)
_STARTS = (
    [sys.executable, "-m", "broker"],
    [sys.executable, "-c", "import sys; from broker.cli import main; sys.argv[0] = 'kafkalite'; sys.exit(main())"],
)


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` (and root itself): (mode, size, mtime in ns)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def serve(start: list[str], data_dir: Path, port: int = 0, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKALITE_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [*start, "serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "[error" in line or '"level": "error"' in line]


def test_a_second_broker_process_on_a_directory_in_use_is_refused_every_time_and_touches_nothing(tmp_path):
    from confluent_kafka import Producer

    data = tmp_path / "data"
    first = BrokerProcess(data).start()
    try:
        p = Producer({"bootstrap.servers": first.bootstrap})
        for i in range(20):
            p.produce("locked", f"v{i}".encode())
        assert p.flush(15) == 0
        assert (data / LOCK_FILE).read_text().strip() == str(first.proc.pid)
        before = tree(data)
        assert "locked-0" in before and LOCK_FILE in before

        def attempt(i: int) -> subprocess.CompletedProcess:
            return serve(_STARTS[i % 2], data)

        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(attempt, range(ATTEMPTS)))
        assert tree(data) == before  # nothing created, truncated or rewritten, by any attempt
        for out in results:
            assert out.returncode == 1, out.stderr
            assert "READY" not in out.stdout and "Traceback" not in out.stderr
            errors = error_lines(out.stderr)
            assert len(errors) == 1, out.stderr
            assert "data directory in use" in errors[0] and str(data.resolve()) in errors[0] and f"pid={first.proc.pid}" in errors[0]
        # the first broker still serves
        p.produce("locked", b"after")
        assert p.flush(15) == 0
    finally:
        assert first.stop() == 0
    # its lock went with it: the next broker starts on the directory
    again = BrokerProcess(data).start()
    assert (data / LOCK_FILE).read_text().strip() == str(again.proc.pid)
    assert again.stop() == 0


def test_json_log_format_names_the_holder(tmp_path):
    import json

    first = BrokerProcess(tmp_path / "data").start()
    pid = first.proc.pid
    try:
        out = serve(_STARTS[0], tmp_path / "data", 0, "--log-format", "json")
    finally:
        first.stop()
    assert out.returncode == 1
    records = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    errors = [r for r in records if r.get("level") == "error"]
    assert len(errors) == 1 and errors[0]["event"] == "data directory in use by another broker"
    assert errors[0]["pid"] == pid and errors[0]["data_dir"] == str((tmp_path / "data").resolve())


@pytest.mark.parametrize("start", _STARTS, ids=["python-m-broker", "kafkalite"])
def test_a_port_in_use_leaves_a_fresh_directory_nonexistent(tmp_path, start):
    first = BrokerProcess(tmp_path / "a").start()
    try:
        out = serve(start, tmp_path / "b", first.port)
        metrics = serve(start, tmp_path / "c", 0, "--metrics-port", str(first.port))
    finally:
        first.stop()
    for result in (out, metrics):
        assert result.returncode == 1 and "READY" not in result.stdout and "Traceback" not in result.stderr
        errors = error_lines(result.stderr)
        assert len(errors) == 1 and "cannot listen" in errors[0], result.stderr
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_a_port_in_use_leaves_an_existing_directory_untouched(tmp_path):
    data = tmp_path / "data"
    BrokerProcess(data).start().stop()  # a directory with logs, meta.json and the lock file
    before = tree(data)
    first = BrokerProcess(tmp_path / "a").start()
    try:
        out = serve(_STARTS[0], data, first.port)
    finally:
        first.stop()
    assert out.returncode == 1 and "cannot listen" in out.stderr
    assert tree(data) == before


@pytest.mark.parametrize("below", [False, True], ids=["file", "below-a-file"])
def test_data_dir_naming_a_file_gets_one_clear_line(tmp_path, below):
    f = tmp_path / "a-file"
    f.write_text("not a directory\n")
    out = serve(_STARTS[0], f / "sub" if below else f)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "READY" not in out.stdout
    errors = error_lines(out.stderr)
    assert len(errors) == 1, out.stderr
    assert "cannot listen" not in errors[0] and "port=?" not in errors[0]
    assert ("Not a directory" in errors[0]) if below else ("data directory is not a directory" in errors[0])
    assert f.read_text() == "not a directory\n"


async def test_in_process_brokers_lock_per_directory(tmp_path):
    """broker.testing (and so the pytest plugin): two brokers on two directories run side by
    side; a third on a directory in use is refused untouched; a restart gets the lock back."""
    async with Broker(tmp_path / "a") as a, Broker(tmp_path / "b") as b:
        assert a.port != b.port
        await a.create_topic("t", 2)
        before = tree(tmp_path / "a")
        with pytest.raises(DataDirError, match="in use") as info:
            await Broker(tmp_path / "a").start()
        assert info.value.fields["pid"] == os.getpid()
        assert tree(tmp_path / "a") == before
        await a.restart()
        assert a.topics()["t"] == 2


def test_plugin_broker_thread_holds_its_directory(tmp_path):
    with BrokerThread(tmp_path / "d") as held:
        assert held.running
        second = BrokerThread(tmp_path / "d")
        try:
            with pytest.raises(DataDirError, match="in use"):
                second.start()
            assert not second.running
        finally:
            second.close()
    with BrokerThread(tmp_path / "d") as again:  # released on a clean stop
        assert again.running


async def test_a_failed_load_releases_the_lock(tmp_path):
    """A start that locked but could not load (a broken ACL file here) leaves the directory free."""
    settings = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "User:admin"}
    data = tmp_path / "d"
    data.mkdir()
    from broker.security.authorizer import FILE

    (data / FILE).write_text("{not json")
    with pytest.raises(RuntimeError, match="cannot read ACLs"):
        await Broker(data, settings=settings).start()
    (data / FILE).unlink()
    broker = Broker(data, settings=settings)
    await broker.start()
    assert broker.running
    await broker.close()
