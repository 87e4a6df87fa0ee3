"""franz-go's own transactional test, ``TestTxnEtl`` from pkg/kgo's test files, against the broker.

The module (the franz-go version tests/clients/go/go.mod pins) comes from the Go
module proxy; its tests run from a writable copy with ``KGO_SEEDS`` pointing at
the broker, replication factor 1, and ``KGO_TEST_RECORDS`` records (50,000 here;
franz-go's default is 500,000). The test chains producers and transactional
consume-transform-produce sessions of a group through several topics and checks
that every record arrives exactly once, in order per key.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.clients.toolchains import GO_SRC, go_versions

RECORDS = int(os.environ.get("KAFKALITE_KGO_TEST_RECORDS", "50000"))


@pytest.mark.compat("franz-go", "its own TestTxnEtl (transactional consume-transform-produce, exactly once)")
def test_franz_go_txn_etl(go_toolchain, broker, tmp_path):
    go = shutil.which("go")
    version = go_versions()["franz-go"]
    env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    info = subprocess.run([go, "mod", "download", "-json", f"github.com/twmb/franz-go@{version}"], cwd=GO_SRC, env=env,
                          capture_output=True, text=True, timeout=600)
    if info.returncode != 0:
        pytest.skip(f"franz-go {version} not available from the Go module proxy: {info.stderr.strip()[-300:]}")
    src = tmp_path / "franz-go"
    shutil.copytree(json.loads(info.stdout)["Dir"], src)
    for path in src.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    run = subprocess.run([go, "test", "-count=1", "-run", "^TestTxnEtl$", "-timeout", "15m", "."], cwd=src / "pkg" / "kgo",
                         env={**env, "KGO_SEEDS": broker.bootstrap, "KGO_TEST_RF": "1", "KGO_TEST_RECORDS": str(RECORDS)},
                         capture_output=True, text=True, timeout=1000)
    tail = (run.stdout + run.stderr)[-3000:]
    assert run.returncode == 0, tail
    assert "ok" in run.stdout and "FAIL" not in run.stdout, tail
