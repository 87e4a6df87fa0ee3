"""librdkafka's own test suite (tests/ of its source tree), built from Debian's source package.

Source: the upstream tarball of Debian's source package of librdkafka
(``librdkafka_<VERSION>.orig.tar.gz``) from the pool of the Debian mirror
/etc/apt names (default deb.debian.org), checked against ``ORIG_SHA256``.
The version is the one Debian unstable carries; librdkafka >= 2.10 knows
KIP-848 (``group.protocol=consumer``), which this one does.

Build (once, cached under ``~/.cache/kafkalite/peers``): ``./configure``
without SASL/GSSAPI/SSL/curl (no test here uses them), ``make libs``, then
``make build`` in tests/ (the ``test-runner``). It needs gcc, g++, make and
zlib; zstd, lz4 and RapidJSON (tests that check statistics JSON) are used
when their -dev packages are there, which the preparation installs with apt-get when it runs as root on Debian (unless
``KAFKALITE_NO_APT`` is set).

Tests (``discover``): the entries of tests/test.c's test table that need a broker (not
``TEST_F_LOCAL``, manual or known-issue), less those for SSL, SASL, OAUTHBEARER
or ACL-authorised principals, and two that only talk to librdkafka's mock
cluster (``EXCLUDED``). ``TESTS=<number>`` runs every test
of a number, so the unit of a run is a number; ``TEST_REPORT`` names the JSON
report the runner writes, which gives each test's state. The runner runs in
quick mode (``-Q``), without the other runner's resource checks, with
``TEST_KAFKA_VERSION`` set to the reference Kafka's version (the tests pick
broker features by it) and a ``test.conf`` naming the broker.

The cluster suite (``librdkafka_cluster``, against 3 brokers) runs the numbers
of ``discover_cluster``: those whose source creates topics with replication
factor 3 (or the brokers' default) or says it needs, or counts, several brokers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests import reference_kafka
from tests.clients.toolchains import Unavailable, _apt_install, _locked, _run, _which
from tests.peers.cache import CACHE, publish, staging_dir

VERSION = "2.14.2"  # Debian unstable's librdkafka (2.14.2-1)
ORIG = f"librdkafka_{VERSION}.orig.tar.gz"
ORIG_SHA256 = "4d53568c13717b167d12c7b2a0fe12aeb5d6bfe02de53df5b68f86d870a81b33"
POOL = "pool/main/libr/librdkafka"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# codecs, and RapidJSON, without which the tests that check statistics JSON (0053, 0098, 0101, 0110) skip
DEV_PACKAGES = ("zlib1g-dev", "libzstd-dev", "liblz4-dev", "rapidjson-dev")
CONFIGURE = ("--disable-gssapi", "--disable-sasl", "--disable-ssl", "--disable-curl")
BUILD_TIMEOUT_S = float(os.environ.get("KAFKALITE_LIBRDKAFKA_BUILD_TIMEOUT", 1200))
TEST_TIMEOUT_S = float(os.environ.get("KAFKALITE_LIBRDKAFKA_TEST_TIMEOUT", 180))  # the slowest number takes 65 s
TIMEOUT_MULTIPLIER = os.environ.get("KAFKALITE_LIBRDKAFKA_TIMEOUT_MULTIPLIER", "2")
# "consumer" runs the consumer tests with KIP-848 groups (librdkafka's TEST_CONSUMER_GROUP_PROTOCOL); by hand only:
# the pass list is recorded with classic groups
GROUP_PROTOCOL = os.environ.get("KAFKALITE_LIBRDKAFKA_GROUP_PROTOCOL")

# broker tests that need what a plain single-broker listener does not offer
EXCLUDED = {
    "0097_ssl_verify": "SSL",
    "0115_producer_auth": "ACL-authorised principals",
    "0119_consumer_auth": "ACL-authorised principals",
    "0126_oauthbearer_oidc": "SASL/OAUTHBEARER with an OIDC server",
    "0135_sasl_credentials": "SASL",
    "0142_reauthentication": "SASL re-authentication",
    # flagged as broker tests but run against librdkafka's mock cluster only
    "0139_offset_validation_mock": "librdkafka's mock cluster, not the broker",
    "0150_telemetry_mock": "librdkafka's mock cluster, not the broker",
}


@dataclass
class Built:
    version: str
    root: Path  # the source tree; tests/test-runner is built

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"


@dataclass
class Outcome:
    name: str  # the test number, e.g. "0045"
    result: str  # pass, fail, skip: of all its tests together
    seconds: float
    detail: str = ""
    subtests: dict[str, str] = field(default_factory=dict)  # test name -> pass/fail/skip


def mirror() -> str:
    """The Debian archive the system's apt uses (its first non-security ``deb`` URI)."""
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources", "") and path.is_file():
            try:
                texts.append(path.read_text())
            except OSError:
                continue
    for text in texts:
        for uri in re.findall(r"(?:URIs:\s*|^deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.M):
            if uri.rstrip("/").endswith("/debian") and "security" not in uri:
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def _download() -> Path:
    target = CACHE / "downloads" / ORIG
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == ORIG_SHA256:
        return target
    url = f"{mirror()}/{POOL}/{ORIG}"
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
    except OSError as e:
        raise Unavailable(f"cannot download {url}: {e}") from e
    digest = hashlib.sha256(data).hexdigest()
    if digest != ORIG_SHA256:
        raise Unavailable(f"{url} has sha256 {digest}, expected {ORIG_SHA256}")
    target.write_bytes(data)
    return target


def _dev_packages() -> None:
    """Install the compression -dev packages with apt-get where allowed; the build works without them."""
    missing = [p for p in DEV_PACKAGES
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0] if shutil.which("dpkg") else []
    if not missing or os.environ.get("KAFKALITE_NO_APT") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    with _locked("apt"):
        for package in missing:
            try:
                _apt_install(package)
            except Unavailable:
                pass  # configure falls back to the bundled or no codec


def prepare() -> Built:
    recipe = hashlib.sha256(repr((CONFIGURE, DEV_PACKAGES)).encode()).hexdigest()[:8]
    out = CACHE / f"librdkafka-{VERSION}-{recipe}"
    runner = out / "tests" / "test-runner"
    with _locked("peers-librdkafka"):
        if runner.exists():
            return Built(VERSION, out)
        for tool in ("gcc", "g++", "make"):
            _which(tool, "librdkafka and its test runner are built from source")
        tarball = _download()
        _dev_packages()
        staging = staging_dir("librdkafka")
        try:
            with tarfile.open(tarball) as tar:
                tar.extractall(staging, filter="data")
            (root,) = [p for p in staging.iterdir() if p.is_dir()]
            jobs = f"-j{os.cpu_count() or 1}"
            _run(["./configure", *CONFIGURE], "librdkafka ./configure", 300, cwd=root)
            _run(["make", jobs, "libs"], "make libs of librdkafka", BUILD_TIMEOUT_S, cwd=root)
            _run(["make", jobs, "build"], "make build of librdkafka's tests", BUILD_TIMEOUT_S, cwd=root / "tests")
            root.rename(staging / "tree")
            publish(staging / "tree", out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Built(VERSION, out)


_NOT_BROKER_TESTS = {"TEST_F_LOCAL", "TEST_F_MANUAL", "TEST_F_KNOWN_ISSUE"}
_ENTRY = re.compile(r"_TEST\(\s*(\d{4}_\w+)\s*,\s*([^,)]*)")


def broker_tests(built: Built) -> dict[str, list[str]]:
    """Test number -> the names of its broker tests, from tests/test.c's table."""
    text = (built.tests_dir / "test.c").read_text()
    table = text[text.index("struct test tests[] = {"):]
    table = table[: table.index("{NULL}")]
    out: dict[str, list[str]] = {}
    for name, flags in _ENTRY.findall(table):
        # exact flag names: TEST_F_KNOWN_ISSUE_WIN32 and _OSX are 0 on Linux
        if {f.strip() for f in flags.split("|")} & _NOT_BROKER_TESTS or name in EXCLUDED:
            continue
        out.setdefault(name[:4], []).append(name)
    return out


def discover(built: Built) -> list[str]:
    return sorted(broker_tests(built))


# what marks a test as one for a cluster (librdkafka's own runner starts 3 brokers, tests/scenarios/*.json
# give replication_factor 3): a topic created with replication factor 3, or with the brokers' default
# (-1, which default.replication.factor=3 makes 3); or a test that says it needs 3 brokers, or counts them
_CLUSTER_RF = re.compile(r"create_topic\w*\(\s*[^,;]+,[^,;]+,[^,;]+,\s*(?:3|-1)\s*[,)]")
_CLUSTER_SAYS = re.compile(r"least 3 brokers|test_get_broker_ids\(")


def discover_cluster(built: Built) -> list[str]:
    """The numbers of ``discover`` whose source (tests/<number>-*.c, .cpp) needs or uses a cluster:
    ``_CLUSTER_RF`` or ``_CLUSTER_SAYS`` matches it."""
    numbers = set(broker_tests(built))
    out = set()
    for path in built.tests_dir.glob("[0-9][0-9][0-9][0-9]-*.c*"):
        text = path.read_text(errors="replace")
        if path.name[:4] in numbers and (_CLUSTER_RF.search(text) or _CLUSTER_SAYS.search(text)):
            out.add(path.name[:4])
    return sorted(out)


_STATES = {"PASSED": "pass", "FAILED": "fail", "SKIPPED": "skip"}


def run(built: Built, number: str, bootstrap: str, timeout: float = TEST_TIMEOUT_S,
        group_protocol: str | None = None) -> Outcome:
    """Run the broker tests of ``number`` (e.g. "0045") against ``bootstrap``."""
    names = broker_tests(built).get(number, [])
    work = Path(staging_dir("rdk-run"))
    try:
        conf, report = work / "test.conf", work / "report.json"
        conf.write_text(f"bootstrap.servers={bootstrap}\ntest.timeout.multiplier={TIMEOUT_MULTIPLIER}\n")
        env = {**os.environ, "RDKAFKA_TEST_CONF": str(conf), "TEST_REPORT": str(report), "TESTS": number,
               "TEST_KAFKA_VERSION": reference_kafka.KAFKA_VERSION, "TEST_LEVEL": "1",
               # the runner skips its timing tests where CI is set: set everywhere, so that a pass list recorded
               # on one machine holds on CI's
               "CI": "true",
               "LD_LIBRARY_PATH": f"{built.root / 'src'}:{built.root / 'src-cpp'}"}
        if group_protocol or GROUP_PROTOCOL:
            env["TEST_CONSUMER_GROUP_PROTOCOL"] = group_protocol or GROUP_PROTOCOL
        _litter_enter(built)
        start = time.monotonic()
        try:
            proc = subprocess.run(["./test-runner", "-L", "-Q", "-p1"], cwd=built.tests_dir, env=env,
                                  capture_output=True, text=True, timeout=timeout)
            output = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            output = (e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or "")
            output += f"\nkilled after {timeout:.0f}s"
        finally:
            _litter_leave(built)
        seconds = time.monotonic() - start
        states = _report_states(report)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    subtests = {name: _STATES.get(states.get(name, ""), "fail") for name in names}
    results = set(subtests.values())
    result = "fail" if "fail" in results or not subtests else ("pass" if "pass" in results else "skip")
    detail = _summary(_strip_colours(output))
    if result == "skip" and not detail:
        detail = "skipped silently by test-runner (the test needs another scenario, such as noautocreate)"
    elif result != "pass" and not detail:
        detail = _strip_colours(output)[-3000:]
    return Outcome(number, result, seconds, detail, subtests)


_NOTEWORTHY = re.compile(r"TEST FAILURE|^### Test|assertion failed|SKIPPING TEST|killed after")


def _summary(output: str) -> str:
    """The runner's failure and skip lines (and the message line after each "### Test ... failed")."""
    lines = output.splitlines()
    keep = [i for i, line in enumerate(lines) if _NOTEWORTHY.search(line)]
    keep += [i + 1 for i in keep if lines[i].startswith("### Test") and i + 1 < len(lines)]
    return "\n".join(lines[i] for i in sorted(set(keep)))[-3000:]


def _litter(built: Built) -> list[Path]:
    """The files the runner leaves in its directory: statistics and the legacy consumer's offset files."""
    return [*built.tests_dir.glob("stats_*.json"), *built.tests_dir.glob("rdkafkatest_*.offset")]


# runners may share the directory (the gate runs units side by side): what they leave is removed
# once none runs, so that no runner loses an offset file it reads back
_tidy = threading.Lock()
_running = 0
_before: set[Path] = set()


def _litter_enter(built: Built) -> None:
    global _running, _before
    with _tidy:
        if _running == 0:
            _before = set(_litter(built))
        _running += 1


def _litter_leave(built: Built) -> None:
    global _running
    with _tidy:
        _running -= 1
        if _running == 0:
            for path in set(_litter(built)) - _before:
                path.unlink(missing_ok=True)


def _report_states(report: Path) -> dict[str, str]:
    try:
        data = json.loads(report.read_text(errors="replace"))
    except (OSError, ValueError):
        return {}
    return {name: t.get("state", "") for name, t in data.get("tests", {}).items()}


def _strip_colours(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
