"""Fixtures of the client matrix, and the results file COMPATIBILITY.md is made from.

Toolchains: ``go_toolchain``, ``node_toolchain``, ``kcat_toolchain`` and
``java_toolchain`` (session-scoped) each prepare their client once
(``tests/clients/toolchains.py``: builds, downloads and installs, bounded in
time, into a cache outside the repository). The preparations of every toolchain
the selected tests need start together, in background threads, when the first
test of this directory runs, so a first run costs the slowest of them rather than
their sum. Where a toolchain is missing the tests that need it are skipped with
the reason; with ``KAFKALITE_REQUIRE_CLIENTS=1`` (CI) they fail instead.

Broker: one kafkalite for the directory (``broker``), with a 500 ms KIP-848
heartbeat interval; tests use unique topic and group names, and a broker that
died is restarted for the next test.

Results: a test marked ``@pytest.mark.compat(client, feature)`` is a row of the
matrix; so are the Java client tests of tests/integration/test_java_clients.py
(their kafkalite runs), listed in ``EXTERNAL``. At the end of the session every
row that ran is merged into ``$KAFKALITE_CLIENT_RESULTS`` (default
``build/client-matrix.json``) and ``python -m tests.clients.report`` turns that
file into COMPATIBILITY.md.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import reference_kafka
from tests.broker_process import BrokerProcess
from tests.clients import toolchains
from tests.clients.report import JAVA_CLIENT, RESULTS, ROOT

REQUIRE = bool(os.environ.get("KAFKALITE_REQUIRE_CLIENTS"))
PREPARE_BOUND_S = 1800  # the preparations carry their own bounds; this one only stops a hung wait

KAFKALITE_ARGS = ("--group-consumer-heartbeat-interval-ms", "500", "--group-consumer-session-timeout-ms", "10000")
# KAFKALITE_CLIENTS_AGAINST=kafka runs the matrix against an Apache Kafka 4.1 broker with the same
# KIP-848 timings instead (tests/reference_kafka.py), to show the tests assert what Kafka does; such a
# run records no results.
AGAINST = os.environ.get("KAFKALITE_CLIENTS_AGAINST", "kafkalite")
REFERENCE_CONFIG = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 10000,
    "group.consumer.min.session.timeout.ms": 1000,
}

# Tests elsewhere that are rows of the matrix: (file, function) -> (client, feature).
EXTERNAL = {
    ("tests/integration/test_java_clients.py", "test_java_producer_to_classic_consumer_commit_and_resume"):
        (JAVA_CLIENT, "producer → classic consumer: round trip, group join, commit, resume"),
    ("tests/integration/test_java_clients.py", "test_java_kip848_consumers_share_consume_and_commit"):
        (JAVA_CLIENT, "group.protocol=consumer (KIP-848): two members share, consume, commit"),
    ("tests/integration/test_java_clients.py", "test_java_kip848_and_classic_members_in_one_group"):
        (JAVA_CLIENT, "KIP-848 and classic members in one group (both join orders)"),
    ("tests/integration/test_java_clients.py", "test_java_admin_describe_list_alter_delete"):
        (JAVA_CLIENT + " AdminClient", "describe/list/delete groups, alter/list/delete offsets"),
    ("tests/integration/test_java_clients.py", "test_java_consume_transform_produce_with_send_offsets_to_transaction"):
        (JAVA_CLIENT, "transactions: consume-transform-produce with sendOffsetsToTransaction (classic and KIP-848 groups), read_committed"),
}
EXTERNAL_FILES = {f for f, _ in EXTERNAL}


def pytest_configure(config):
    config.addinivalue_line("markers", "compat(client, feature): the test is a row of COMPATIBILITY.md")


# -- toolchains ----------------------------------------------------------------------

TOOLCHAIN_FIXTURES = {"go_toolchain": "go", "node_toolchain": "node", "kcat_toolchain": "kcat", "java_toolchain": "java"}
_executor = concurrent.futures.ThreadPoolExecutor(max_workers=len(toolchains.PREPARE), thread_name_prefix="toolchain")
_futures: dict[str, concurrent.futures.Future] = {}
_prepared: dict[str, toolchains.Toolchain] = {}


def _start(name: str) -> concurrent.futures.Future:
    if name not in _futures:
        _futures[name] = _executor.submit(toolchains.PREPARE[name])
    return _futures[name]


@pytest.fixture(scope="session", autouse=True)
def _prepare_toolchains(request):
    """Start preparing, in parallel, every toolchain the selected tests use."""
    for item in request.session.items:
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in TOOLCHAIN_FIXTURES:
                _start(TOOLCHAIN_FIXTURES[fixture])


def _toolchain(name: str) -> toolchains.Toolchain:
    try:
        t = _start(name).result(timeout=PREPARE_BOUND_S)
    except toolchains.Unavailable as e:
        (pytest.fail if REQUIRE else pytest.skip)(f"{name} toolchain unavailable: {e}")
    except concurrent.futures.TimeoutError:
        (pytest.fail if REQUIRE else pytest.skip)(f"{name} toolchain not ready within {PREPARE_BOUND_S}s")
    _prepared[name] = t
    return t


@pytest.fixture(scope="session")
def go_toolchain():
    return _toolchain("go")


@pytest.fixture(scope="session")
def node_toolchain():
    return _toolchain("node")


@pytest.fixture(scope="session")
def kcat_toolchain():
    return _toolchain("kcat")


@pytest.fixture(scope="session")
def java_toolchain():
    return _toolchain("java")


# -- broker --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _matrix_broker(tmp_path_factory):
    if AGAINST == "kafka":  # cross-check the tests themselves against Apache Kafka 4.1
        ok, reason = reference_kafka.available()
        if not ok:
            pytest.skip(reason)
        b = reference_kafka.ReferenceKafka(tmp_path_factory.mktemp("reference-kafka-clients"), config=REFERENCE_CONFIG)
    else:
        b = BrokerProcess(tmp_path_factory.mktemp("kafkalite-clients"), *KAFKALITE_ARGS)
    b.start()
    yield b
    if b.proc is not None:
        b.stop()


@pytest.fixture
def broker(_matrix_broker):
    """The directory's kafkalite, running (restarted if a previous test left it dead)."""
    b = _matrix_broker
    if b.proc is not None and b.proc.poll() is not None:
        b.proc = None
    if b.proc is None:
        b.start()
    return b


# -- results -------------------------------------------------------------------------


def _row_of(item) -> tuple[str, str] | None:
    marker = item.get_closest_marker("compat")
    if marker is not None:
        return marker.args[0], marker.args[1]
    path = Path(str(item.fspath)).resolve()
    try:
        rel = path.relative_to(ROOT).as_posix()
    except ValueError:
        return None
    if rel not in EXTERNAL_FILES:
        return None
    if "kafka" in getattr(getattr(item, "callspec", None), "params", {}).values():
        return None  # the run against the reference broker, not kafkalite
    name = getattr(item, "originalname", item.name)
    return EXTERNAL.get((rel, name), (JAVA_CLIENT, name.removeprefix("test_java_").replace("_", " ")))


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        row = _row_of(item)
        if row is not None:
            item.user_properties.append(("compat", {"client": row[0], "feature": row[1]}))


def _versions() -> dict[str, tuple[str, str]]:
    """client -> (version, runtime), from the pinned sources and whatever toolchain was prepared."""
    runtime = {name: t.runtime for name, t in _prepared.items()}
    out = {}
    for name, v in toolchains.go_versions().items():
        out[name] = (v, runtime.get("go", ""))
    out["kafkajs"] = (toolchains.node_versions()["kafkajs"], runtime.get("node", ""))
    java = toolchains.java_versions()
    for client in (JAVA_CLIENT, JAVA_CLIENT + " AdminClient"):
        out[client] = (java["kafka-clients"], runtime.get("java", ""))
    for tool in ("kafka-consumer-groups", "kafka-reassign-partitions"):
        out[tool] = (java[tool], runtime.get("java", ""))
    if "kcat" in _prepared:
        out["kcat"] = (_prepared["kcat"].versions["kcat"], "")
    return out


def _message(rep) -> str:
    longrepr = rep.longrepr
    if rep.skipped and isinstance(longrepr, tuple):
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr or "")
    return " ".join(text.split())[:400]


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tests: dict[str, dict] = {}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            props = dict(getattr(rep, "user_properties", ()) or ())
            if "compat" not in props or not hasattr(rep, "when"):
                continue
            t = tests.setdefault(rep.nodeid, {**props["compat"], "nodeid": rep.nodeid, "outcome": "passed", "seconds": 0.0, "message": ""})
            t["seconds"] += rep.duration
            if rep.failed:
                t["outcome"], t["message"] = ("failed" if rep.when == "call" else f"error in {rep.when}"), _message(rep)
            elif rep.skipped and t["outcome"] == "passed":
                t["outcome"], t["message"] = "skipped", _message(rep)
    if not tests or AGAINST != "kafkalite":
        return
    versions = _versions()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    commit = _git_commit()
    rows: dict[tuple[str, str], dict] = {}
    for t in sorted(tests.values(), key=lambda t: t["nodeid"]):
        row = rows.setdefault((t["client"], t["feature"]), {
            "client": t["client"], "feature": t["feature"], "version": versions.get(t["client"], ("", ""))[0],
            "runtime": versions.get(t["client"], ("", ""))[1], "run_at": now, "kafkalite": commit, "tests": []})
        row["tests"].append({k: t[k] for k in ("nodeid", "outcome", "seconds", "message")})
    for row in rows.values():
        outcomes = [t["outcome"] for t in row["tests"]]
        row["status"] = ("fail" if any(o not in ("passed", "skipped") for o in outcomes)
                         else "skip" if all(o == "skipped" for o in outcomes)
                         else "pass")
    previous = []
    try:
        previous = json.loads(RESULTS.read_text()).get("rows", [])
    except (OSError, ValueError):
        pass
    # a row of an earlier run is dropped when this run re-ran one of its tests (the row was renamed or
    # replaced) or when its test file is gone; the others stay
    ran = set(tests)
    merged = {(r["client"], r["feature"]): r for r in previous
              if not any(t["nodeid"] in ran or not (ROOT / t["nodeid"].split("::")[0]).exists() for t in r.get("tests", []))}
    merged.update(rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": list(merged.values())}, indent=1, ensure_ascii=False) + "\n")
    counts = {s: sum(1 for r in rows.values() if r["status"] == s) for s in ("pass", "fail", "skip")}
    terminalreporter.write_sep("-", "client matrix")
    terminalreporter.write_line(f"{len(rows)} rows ({counts['pass']} pass, {counts['fail']} fail, {counts['skip']} skip) merged into {RESULTS}; "
                                "regenerate COMPATIBILITY.md with: python -m tests.clients.report")
    for r in rows.values():
        if r["status"] != "pass":
            terminalreporter.write_line(f"  {r['status'].upper()}: {r['client']} — {r['feature']}: "
                                        + "; ".join(t["message"] for t in r["tests"] if t["message"])[:300])


def pytest_unconfigure(config):
    _executor.shutdown(wait=False, cancel_futures=True)
