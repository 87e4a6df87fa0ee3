"""A bounded run of the protocol fuzzer (``tests.fuzz.protocol``) inside ``make test``.

The invariant, for every frame: ``ServerConnection.receive_data`` returns
events or raises ``ProtocolError``, and when a request decodes, the bounded
walk and kio end the header and the body at the same byte. An abort would
take pytest down with it, which fails the run as loudly as anything; the long
run (``python -m tests.fuzz.protocol``) keeps its decoders in child processes
instead and saves what it finds to ``tests/fuzz/corpus``, replayed here.
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.handlers import supported_versions
from protocol.codec import build, request_class
from protocol.connection import Request, ServerConnection
from tests.fuzz import protocol as fuzz

ROOT = Path(__file__).parents[2]
def test_every_advertised_version_has_two_seeds_and_both_decode():
    supported = supported_versions()
    expected = {(k, v) for k, (lo, hi) in supported.items() for v in range(lo, hi + 1)}
    assert {(s.api_key, s.version) for s in fuzz.seeds()} == expected
    assert len(fuzz.seeds()) == 2 * len(expected)
    for seed in fuzz.seeds():
        [event] = ServerConnection(supported).receive_data(struct.pack(">i", len(seed.frame)) + seed.frame)
        assert isinstance(event, Request), (seed.api_key, seed.version)
        assert fuzz.check_frame(seed.frame) is None


def test_rich_seeds_round_trip():
    # the rich seeds reach every nested array and tagged field, so the sweep below does too
    for seed in fuzz.rich_seeds():
        cls = request_class(seed.api_key, seed.version)
        [event] = ServerConnection(supported_versions()).receive_data(struct.pack(">i", len(seed.frame)) + seed.frame)
        assert event.body == build(cls, fuzz.rich_body(cls)), (seed.api_key, seed.version)


@pytest.mark.parametrize("api_key", sorted(supported_versions()))
def test_sweep_lying_lengths_at_every_offset(api_key):
    """Every version's rich frame, each sweep token written over and inserted at every body offset."""
    problems = []
    tried = 0
    for seed in fuzz.rich_seeds():
        if seed.api_key != api_key:
            continue
        frame = seed.frame
        for pos in range(seed.header_len, len(frame)):
            for token in fuzz.SWEEP_TOKENS:
                for mutated in (frame[:pos] + token + frame[pos + len(token) :], frame[:pos] + token + frame[pos:]):
                    tried += 1
                    problem = fuzz.check_frame(mutated)
                    if problem is not None:
                        problems.append((mutated.hex(), problem))
    assert tried > 0
    assert problems == []


def test_random_stacked_mutations():
    rng = random.Random(20240501)
    problems = []
    for _ in range(100_000):
        frame = fuzz.random_frame(rng)
        problem = fuzz.check_frame(frame)
        if problem is not None:
            problems.append((frame.hex(), problem))
    assert problems == []


_mutation = st.tuples(st.sampled_from(fuzz.OPS), st.integers(0, 2**30), st.integers(0, 2**16), st.integers(0, 2**16))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, len(fuzz.seeds()) - 1), mutations=st.lists(_mutation, min_size=1, max_size=4))
def test_hypothesis_mutations(seed, mutations):
    s = fuzz.seeds()[seed]
    frame = s.frame
    for op, a, b, c in mutations:
        frame = fuzz.apply_op(frame, op, a, b, c, s.header_len)
    assert fuzz.check_frame(frame) is None


@pytest.mark.parametrize("path", fuzz.corpus_files(), ids=lambda p: p.name)
def test_corpus_replays(path):
    assert fuzz.check_stream(path.read_bytes()) is None


def test_corpus_is_not_empty():
    # it holds the frames that aborted the broker before the bounded walk
    assert len(fuzz.corpus_files()) >= 10


def test_long_runner_survives_and_locates_an_abort(tmp_path):
    """The runner's children die of SIGABRT on frame 1234 (its self-test); the run reports and saves it."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.protocol", "--frames", "1500", "--corpus", str(tmp_path), "--self-test-abort", "1234"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "CRASH frame 1234: signal 6" in proc.stdout
    assert "frames 1500  crashes 1  hangs 0  exceptions 0" in proc.stdout
    [saved] = tmp_path.glob("*.bin")
    assert saved.read_bytes()[4:] == fuzz.frame_at(1, 1234)
