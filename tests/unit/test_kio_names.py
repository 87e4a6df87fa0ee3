"""protocol/kio_names.py matches the installed kio, and build() no longer imports other versions."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import kio

from protocol import kio_names
from tests import kio_names_gen


def test_the_table_matches_the_installed_kio():
    assert kio_names.KIO_VERSION == kio.__version__, "kio changed: python -m tests.kio_names_gen"
    assert kio_names.NAMES == kio_names_gen.collect(), "the table is stale: python -m tests.kio_names_gen"


def test_the_generator_writes_the_committed_table():
    assert kio_names_gen.TARGET.read_text() == kio_names_gen.render(kio_names.NAMES)


def test_a_first_answer_imports_only_its_own_version():
    """A Metadata v12 answer with keys of other versions (as handlers build them) loads v12 alone."""
    script = textwrap.dedent(
        """
        import sys
        from protocol.codec import UnknownFieldError, build, response_class
        cls = response_class(3, 12)
        build(cls, {"brokers": [], "topics": [{"name": "t", "topic_id": None, "partitions": [
            {"partition_index": 0, "offline_replicas": []}]}], "cluster_authorized_operations": 0})
        try:
            build(cls, {"brokerz": []})
        except UnknownFieldError as exc:
            print("refused", exc.key)
        print(sorted(m for m in sys.modules if m.startswith("kio.schema.metadata.v")))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "refused brokerz"
    assert {name.split(".")[3] for name in ast.literal_eval(out[1])} == {"v12"}
