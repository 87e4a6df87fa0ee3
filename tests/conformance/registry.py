"""The scenario registry and the runner that plays one scenario against one broker."""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from .driver import Driver


@dataclass
class Scenario:
    name: str
    area: str
    fn: Callable[[Driver], None]
    doc: str = ""
    listener: str | None = None  # "SASL_PLAINTEXT": played on the brokers' SASL listener, logged in (conftest)


@dataclass
class Outcome:
    observations: list[dict] = field(default_factory=list)
    error: str | None = None  # the scenario raised (traceback text)


SCENARIOS: dict[str, Scenario] = {}

AREAS = {
    "classic": "Classic join / sync / heartbeat / leave",
    "static": "Static membership, KIP-394, KIP-814, timeouts",
    "commit": "OffsetCommit validation matrix",
    "fetch": "OffsetFetch edge cases",
    "admin": "Describe / List / Delete / OffsetDelete / FindCoordinator",
    "txn": "Transactions: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, read_committed",
    "kip848": "KIP-848 ConsumerGroupHeartbeat / ConsumerGroupDescribe",
    "share": "KIP-932 share groups: ShareGroupHeartbeat / ShareGroupDescribe and the group APIs on a share group id",
    "data": "Produce / Fetch / ListOffsets / versions / unknown topics",
    "sasl": "SaslHandshake / SaslAuthenticate on a PLAINTEXT listener, SCRAM credentials, ACL APIs without an authorizer",
    "configs": "AlterConfigs / IncrementalAlterConfigs / DescribeConfigs (topics, groups) / DeleteRecords / DescribeLogDirs / ElectLeaders",
    "sharestate": "Share coordinator RPCs (Initialize/Read/Write/Delete/ReadSummary share-group state), FindCoordinator SHARE, share sessions",
}


def scenario(area: str, listener: str | None = None):
    assert area in AREAS, area
    assert listener in (None, "SASL_PLAINTEXT"), listener

    def register(fn: Callable[[Driver], None]) -> Callable[[Driver], None]:
        name = f"{area}.{fn.__name__}"
        assert name not in SCENARIOS, f"duplicate scenario {name}"
        SCENARIOS[name] = Scenario(name, area, fn, (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "", listener)
        return fn

    return register


def load_all() -> dict[str, Scenario]:
    from .scenarios import admin, classic, commit, configs, data, fetch, kip848, sasl, share, sharestate, static, txn  # noqa: F401 - registration

    return SCENARIOS


def run(sc: Scenario, kind: str, bootstrap: str, login: tuple[str, str] | None = None) -> Outcome:
    """Play ``sc`` against one broker; ``login`` (user, password): every ``d.conn`` logs in with SASL PLAIN first."""
    prefix = f"cf{uuid.uuid4().hex[:8]}-"
    d = Driver(kind, bootstrap, prefix, login=login)
    out = Outcome()
    try:
        sc.fn(d)
    except Exception:  # noqa: BLE001 - recorded; compared and reported
        out.error = traceback.format_exc()
    finally:
        d.close()
    out.observations = d.observations
    return out
