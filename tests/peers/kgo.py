"""franz-go's pkg/kgo integration tests, built once and run one test at a time.

The module is the franz-go version tests/clients/go/go.mod pins, from the Go
module proxy (checked against that directory's go.sum), as
tests/clients/test_franz_txn.py takes it. A writable copy gets one file of
ours, ``zz_kafkalite_main_test.go``: a ``TestMain`` that asks the broker for
its API versions before any test runs. franz-go's own tests do that lazily
(``adm()``), and some subtests read the answer (KIP-848, static membership,
share groups) before anything asked, so a test run alone would skip them.
``go test -c`` compiles the package's tests into one binary, cached under
``~/.cache/kafkalite/peers``; each test then runs in its own process (a panic
ends only that test) through ``go tool test2json``.

Environment of every run: ``KGO_SEEDS`` (the broker, or every broker of a
cluster), ``KGO_TEST_RF=1`` (3 for the cluster suite, ``kgo_cluster``),
``KGO_TEST_RECORDS`` (``KAFKALITE_KGO_TEST_RECORDS``, 20,000 here; franz-go's
default is 500,000) and ``KGO_LOG_LEVEL=none``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.clients.toolchains import GO_SRC, _locked, _run, _which, go_versions
from tests.peers.cache import CACHE, publish, staging_dir

RECORDS = int(os.environ.get("KAFKALITE_KGO_TEST_RECORDS", "20000"))
TEST_TIMEOUT_S = float(os.environ.get("KAFKALITE_KGO_TEST_TIMEOUT", 300))
BUILD_TIMEOUT_S = float(os.environ.get("KAFKALITE_GO_BUILD_TIMEOUT", 900))
PACKAGE = "pkg/kgo"

# the one file added to the copy (see the module docstring)
MAIN_SHIM = """\
package kgo

import (
	"os"
	"testing"
)

// TestMain probes the broker's API versions first, as a full parallel run of
// the package does by accident, so that no subtest reads the capability flags
// before they are set.
func TestMain(m *testing.M) {
	if os.Getenv("KGO_SEEDS") != "" {
		adm()
	}
	os.Exit(m.Run())
}
"""


@dataclass
class Built:
    version: str
    binary: Path
    cwd: Path
    go: str


@dataclass
class Outcome:
    name: str
    result: str  # pass, fail, skip
    seconds: float
    detail: str = ""
    subtests: dict[str, str] = field(default_factory=dict)


def version() -> str:
    return go_versions()["franz-go"]


def prepare() -> Built:
    """Download franz-go, add the shim and compile pkg/kgo's tests (once per version)."""
    go = _which("go", "the Go toolchain compiles franz-go's tests")
    ver = version()
    out = CACHE / f"kgo-{ver}-{hashlib.sha256(MAIN_SHIM.encode()).hexdigest()[:8]}"
    binary, cwd = out / "kgo.test", out / "franz-go" / PACKAGE
    with _locked("peers-kgo"):
        if binary.exists():
            return Built(ver, binary, cwd, go)
        env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
        info = _run([go, "mod", "download", "-json", f"github.com/twmb/franz-go@{ver}"],
                    f"go mod download franz-go {ver}", BUILD_TIMEOUT_S, cwd=GO_SRC, env=env)
        staging = staging_dir("kgo")
        try:
            src = staging / "franz-go"
            shutil.copytree(json.loads(info.stdout)["Dir"], src)
            for path in src.rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)
            (src / PACKAGE / "zz_kafkalite_main_test.go").write_text(MAIN_SHIM)
            _run([go, "test", "-c", "-o", str(staging / "kgo.test"), "."], f"go test -c of franz-go {ver} {PACKAGE}",
                 BUILD_TIMEOUT_S, cwd=src / PACKAGE, env=env)
            publish(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Built(ver, binary, cwd, go)


def run(built: Built, name: str, bootstrap: str, records: int = RECORDS, timeout: float = TEST_TIMEOUT_S,
        rf: int = 1) -> Outcome:
    """Run the top-level test ``name`` against ``bootstrap``, its topics created with replication
    factor ``rf`` (``KGO_TEST_RF``); its result and output."""
    env = {**os.environ, "KGO_SEEDS": bootstrap, "KGO_TEST_RF": str(rf), "KGO_TEST_RECORDS": str(records),
           "KGO_LOG_LEVEL": "none"}
    argv = [built.go, "tool", "test2json", "-p", "kgo", str(built.binary), "-test.v=test2json",
            "-test.run", f"^{name}$", "-test.count=1", "-test.timeout", f"{int(timeout)}s"]
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=built.cwd, env=env, capture_output=True, text=True, timeout=timeout + 60)
        stdout, stderr = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = f"killed after {timeout + 60:.0f}s"
    seconds = time.monotonic() - start
    results: dict[str, str] = {}
    output: list[str] = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            output.append(line + "\n")
            continue
        if event.get("Action") == "output":
            output.append(event.get("Output", ""))
        elif event.get("Action") in ("pass", "fail", "skip") and event.get("Test"):
            results[event["Test"]] = event["Action"]
    result = results.get(name, "fail")  # no verdict: the binary died (panic, timeout)
    subtests = {k: v for k, v in results.items() if k != name}
    interesting = [line for line in output if not line.startswith(("=== RUN", "=== PAUSE", "=== CONT", "=== NAME"))]
    detail = "".join(interesting)[-3000:] + stderr[-1000:]
    return Outcome(name, result, seconds, detail, subtests)


# helpers of franz-go's tests that reach the broker at KGO_SEEDS
_BROKER_HELPERS = ("newTestClient", "adm", "getSeedBrokers", "testClientOpts")


def discover(built: Built) -> list[str]:
    """The package's top-level tests that reach the broker: those calling a helper that dials ``KGO_SEEDS``.

    A static scan of the test files: a function needs the broker if it calls
    one of ``_BROKER_HELPERS`` or a function that does.
    """
    bodies: dict[str, str] = {}
    for path in sorted(built.cwd.glob("*_test.go")):
        for chunk in re.split(r"^func ", path.read_text(), flags=re.M)[1:]:
            m = re.match(r"(?:\([^)]*\)\s*)?(\w+)", chunk)
            if m:
                bodies[m.group(1)] = chunk
    needs = set(_BROKER_HELPERS)
    grown = True
    while grown:
        grown = False
        for name, body in bodies.items():
            if name not in needs and any(re.search(rf"\b{n}\(", body) for n in needs):
                needs.add(name)
                grown = True
    return sorted(n for n in needs if n.startswith("Test") and n != "TestMain")
