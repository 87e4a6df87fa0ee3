"""``make test``'s jobs (tests/parallel.py) cover every test file, each once."""

from pathlib import Path

from tests import parallel


def test_every_test_file_is_in_exactly_one_job():
    root = Path(parallel.ROOT)
    every = {str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")}
    assert parallel.covered() == every
    runs = [p for _, paths in parallel.jobs() for p in paths]
    assert len(runs) == len(set(runs))
    names = [name for name, _ in parallel.jobs()]
    assert len(names) == len(set(names))
