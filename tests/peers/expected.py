"""The pass lists: ``tests/peers/<suite>_expected.toml``, read and (re)written.

A list has a header (suite, version, the reference it was recorded against,
settings) and one table per test::

    [tests.TestConsumeRegex]
    kafka = "pass"                    # the result against the reference Kafka
    kafkalite = "fail"                # present only for a known difference
    reason = "why kafkalite fails"    # required with kafkalite
    racy = "why the test itself races" # the gate runs a failed unit once more, on a fresh broker

``verdict`` turns a kafkalite result into what the gate does with it; the
recording command rewrites ``kafka`` (and the header) and keeps every reason, note
and ``racy``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = ("pass", "fail", "skip")


@dataclass
class Entry:
    kafka: str = "unknown"  # pass, fail, skip, or unknown (never recorded)
    kafkalite: str | None = None  # the known kafkalite result, when it differs
    reason: str = ""
    note: str = ""  # what the test does, for the reader of the list
    racy: str = ""  # why the test can fail by itself (a race in the suite's own test): one more run when it fails


@dataclass
class PassList:
    suite: str
    header: dict = field(default_factory=dict)
    tests: dict[str, Entry] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return HERE / f"{self.suite}_expected.toml"


def load(suite: str) -> PassList:
    path = HERE / f"{suite}_expected.toml"
    if not path.exists():
        return PassList(suite)
    data = tomllib.loads(path.read_text())
    tests = {name: Entry(**values) for name, values in data.pop("tests", {}).items()}
    return PassList(suite, data, tests)


def _quote(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'"{text}"'


def _key(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else _quote(name)


def dump(plist: PassList) -> str:
    lines = [f"# {plist.suite}: written by `python -m tests.peers record {plist.suite}`; edit only kafkalite/reason/note.", ""]
    lines += [f"{k} = {_quote(v)}" for k, v in plist.header.items()]
    for name in sorted(plist.tests):
        e = plist.tests[name]
        lines += ["", f"[tests.{_key(name)}]", f"kafka = {_quote(e.kafka)}"]
        if e.kafkalite:
            lines += [f"kafkalite = {_quote(e.kafkalite)}", f"reason = {_quote(e.reason)}"]
        if e.note:
            lines.append(f"note = {_quote(e.note)}")
        if e.racy:
            lines.append(f"racy = {_quote(e.racy)}")
    return "\n".join(lines) + "\n"


def save(plist: PassList) -> None:
    plist.path.write_text(dump(plist))


@dataclass
class Verdict:
    action: str  # "pass", "fail", "xfail", "skip"
    message: str = ""
    stale: bool = False  # a listed difference that did not happen: the list should shrink


def verdict(name: str, entry: Entry | None, result: str, detail: str = "") -> Verdict:
    """What the gate does with kafkalite's ``result`` for the test ``name``.

    A test that passes on the reference Kafka must pass on kafkalite unless
    it is listed with a reason; a listed test that passes is reported as stale.
    """
    entry = entry or Entry()
    if result == "pass":
        if entry.kafkalite:
            return Verdict("pass", f"{name} is listed as failing on kafkalite ({entry.reason}) but passed: "
                                   "remove it from the list", stale=True)
        return Verdict("pass")
    if entry.kafkalite:
        if entry.kafkalite != result:
            return Verdict("xfail", f"listed as {entry.kafkalite}, was {result}: {entry.reason}", stale=True)
        return Verdict("xfail", f"known difference: {entry.reason}")
    if entry.kafka == "pass":
        return Verdict("fail", f"{name} passes on the reference Kafka and {'failed' if result == 'fail' else 'was skipped'} "
                               f"on kafkalite, and is not listed in the pass list:\n{detail}")
    if result == "skip":
        return Verdict("skip", f"skipped (reference Kafka: {entry.kafka}): {detail[-300:]}")
    return Verdict("xfail", f"fails on kafkalite; the reference Kafka result is {entry.kafka!r}")


def totals(suite: str) -> dict:
    """The figures COMPATIBILITY.md shows for a suite, from its pass list."""
    plist = load(suite)
    tests = plist.tests.values()
    return {
        "suite": plist.header.get("suite", suite),
        "version": plist.header.get("version", "?"),
        "reference": plist.header.get("reference", "?"),
        "tests": len(plist.tests),
        "pass_kafka": sum(e.kafka == "pass" for e in tests),
        "pass_kafkalite": plist.header.get("kafkalite_pass", "?"),
        "listed": sum(bool(e.kafkalite) for e in tests),
        "listed_kafka_pass": sum(bool(e.kafkalite) and e.kafka == "pass" for e in tests),
    }


def markdown_section(suites: tuple[str, ...] = ("kgo", "librdkafka", "kgo_cluster", "librdkafka_cluster")) -> list[str]:
    """The "Peer test suites" section of COMPATIBILITY.md (docs/peer-suites.md has the details)."""
    out = ["## Peer test suites", "",
           "Other projects' own test suites, run against a fresh kafkalite per test (the 3-broker suites: against "
           "one 3-node kafkalite, and recorded against a 3-broker Kafka) by `pytest tests/peers` "
           "(part of `make test`); their pass lists in tests/peers/*_expected.toml say which tests pass on the "
           "reference Kafka and why kafkalite fails the listed ones (docs/peer-suites.md).", "",
           "| Suite | Version | Tests run | Pass on Kafka | Pass on kafkalite | Listed differences |",
           "|---|---|---|---|---|---|"]
    for suite in suites:
        t = totals(suite)
        if not t["tests"]:
            continue
        out.append(f"| {t['suite']} | {t['version']} | {t['tests']} | {t['pass_kafka']} ({t['reference']}) | "
                   f"{t['pass_kafkalite']} | {t['listed']} ({t['listed_kafka_pass']} that pass on Kafka) |")
    return out + [""]
