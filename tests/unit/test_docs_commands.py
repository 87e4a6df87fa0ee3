"""What README.md and docs/ tell people to type exists: the ``kafkalite`` subcommands they
name, and the fault helpers called the way the README shows them."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from broker.cli import _parser
from broker.faults import Faults

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _subcommands() -> set[str]:
    sub = next(a for a in _parser()._actions if a.dest == "command")
    return set(sub.choices)


def test_every_kafkalite_command_in_the_docs_exists():
    commands = _subcommands()
    assert {"serve", "topics", "groups", "transactions", "health", "certs", "version"} <= commands
    for path in DOCS:
        text = path.read_text()
        assert "kafkalite-admin" not in text, path
        for word in re.findall(r"`kafkalite ([a-z][a-z-]*)", text):
            assert word in commands, (path.name, word)


def test_the_readme_calls_the_fault_helpers_as_they_can_be_called():
    text = (ROOT / "README.md").read_text()
    paragraph = text[text.index("Faults: ") :].split("\n\n")[0]
    calls = re.findall(r"`(\w+)\(([^)]*)\)`", paragraph)
    assert {name for name, _ in calls} >= {"fail", "delay", "drop", "record"}
    for name, args in calls:
        words = [a.strip() for a in args.split(",") if a.strip()]
        positional = [w for w in words if "=" not in w]
        keywords = {w.split("=")[0]: None for w in words if "=" in w}
        inspect.signature(getattr(Faults, name)).bind(None, *positional, **keywords)  # raises TypeError if it cannot be called so
