"""A structure-aware fuzzer for the protocol layer (no sockets).

    python -m tests.fuzz.protocol --frames N --seconds S [--jobs J] [--seed X] [--corpus DIR]

It feeds mutated request frames to ``ServerConnection.receive_data`` and holds
one invariant: the call returns events or raises ``ProtocolError``. Anything
else is a finding: another exception, a hang, or the process dying (kio's
native reader aborts the process on a lying length, which is what
``protocol.codec``'s bounded walk prevents). For every frame that decodes it
also checks that the walk and kio agree on where the header and the body end,
so that kio never reads a count the walk did not check.

Seeds are valid frames for every API key and version the broker advertises
(``broker.handlers.supported_versions()``), twice each: with empty defaults,
and "rich", with every array holding two entries, every nested struct,
optional and tagged field set. Frames come in two parts:

1. a deterministic sweep: at every offset of every rich body, each of the
   ``SWEEP_TOKENS`` (huge and negative int16/int32, over-long and 2**31..2**35
   varints, -1, 0) both overwrites the bytes there and is inserted there;
2. random stacked mutations: truncation, bit flips, random bytes, deletions,
   duplications, overwrites and insertions of ``TOKENS``, and splices of two
   seeds.

The long run tries frames in child processes (``--jobs`` of them), each
naming its progress every ``CHECKPOINT`` frames. When one dies from a signal,
exits oddly or falls silent (a hang), the frames since its last checkpoint
are run again in a child in "locate" mode, which names each frame before
trying it, so the culprit is known; then the run goes on after it. Every
finding is saved as ``<api>-<hash>.bin`` (the bytes given to
``receive_data``) in the corpus directory, whose files
``tests/fuzz/test_protocol_fuzz.py`` replays as regression cases. The run
prints frames fuzzed, findings by kind and the rate, and exits 1 on any
finding.
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import hashlib
import json
import os
import queue
import random
import struct
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field

from broker.handlers import supported_versions
from protocol import codec
from protocol.codec import build, encode, request_class
from protocol.connection import ProtocolError, Request, ServerConnection, request_header_version

CORPUS = Path(__file__).parent / "corpus"
_SIZE = struct.Struct(">i")


# ---------------------------------------------------------------- seeds


@dataclass(frozen=True)
class Seed:
    api_key: int
    version: int
    frame: bytes  # without the size prefix
    header_len: int


_PRIMITIVES = {
    "bool": True,
    "int8": 3,
    "uint8": 3,
    "int16": 7,
    "uint16": 7,
    "int32": 70000,
    "uint32": 70000,
    "int64": 2**40,
    "uint64": 2**40,
    "float64": 1.5,
    "error_code": ErrorCode.none,
    "uuid": uuid.UUID(int=0x1234),
    "string": "ab",
    "bytes": b"xyz",
    "records": b"records",
    "timedelta_i32": 100,
    "timedelta_i64": 100,
    "datetime_i64": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
}


def rich_body(cls: type) -> dict:
    """Every field set: arrays of two, nested structs filled, tagged fields present."""
    out = {}
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            out[f.name] = [rich_body(kind.type_), rich_body(kind.type_)]
        elif isinstance(kind, EntityField):
            out[f.name] = rich_body(kind.type_)
        elif isinstance(kind, PrimitiveTupleField):
            out[f.name] = [_PRIMITIVES[f.metadata["kafka_type"]]] * 2
        else:
            out[f.name] = _PRIMITIVES[f.metadata["kafka_type"]]
    return out


def header_bytes(api_key: int, version: int, correlation_id: int = 7, client_id: str | None = "fuzz") -> bytes:
    cls = request_class(api_key, version)
    header_version = request_header_version(api_key, version, cls.__flexible__)
    if header_version == 0:
        return struct.pack(">hhi", api_key, version, correlation_id)
    header_cls = HeaderV2 if header_version == 2 else HeaderV1
    return encode(header_cls(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id))


def request_frame(api_key: int, version: int, body: dict) -> bytes:
    """A valid frame (without its size prefix) for ``body``."""
    return header_bytes(api_key, version) + encode(build(request_class(api_key, version), body))


@cache
def seeds() -> tuple[Seed, ...]:
    """Two valid frames per advertised API key and version: defaults, then rich."""
    out = []
    for api_key, (low, high) in sorted(supported_versions().items()):
        for version in range(low, high + 1):
            head = header_bytes(api_key, version)
            cls = request_class(api_key, version)
            for body in ({}, rich_body(cls)):
                out.append(Seed(api_key, version, head + encode(build(cls, body)), len(head)))
    return tuple(out)


@cache
def rich_seeds() -> tuple[Seed, ...]:
    return seeds()[1::2]


# ---------------------------------------------------------------- mutations

# the values a lying length is made of
SWEEP_TOKENS = (
    b"\x7f\xff\xff\xff",  # int32 max
    b"\x80\x00\x00\x00",  # int32 min
    b"\xff\xff\xff\xfe",  # int32 -2
    b"\x7f\xff",  # int16 max
    b"\xff\xfe",  # int16 -2
    b"\xff\xff\xff\xff\x0f",  # varint 2**32 - 1
    b"\x80\x80\x80\x80\x08",  # varint 2**31
    b"\xff\xff\xff\xfe\x7a",  # varint above 2**32
    b"\x80\x80\x80\x80\x80\x01",  # varint of 6 bytes
    b"\xff\xff",  # -1 (null) as int16, or the start of a long varint
    b"\x00",  # compact null / empty
)
TOKENS = SWEEP_TOKENS + (
    b"\xff\xff\xff\xff",  # int32 -1
    b"\x00\x00\x00\x00",
    b"\x00\x01\x00\x00",  # 65536
    b"\x80\x00",  # int16 min
    b"\xff\xff\xff\xff\xff\xff\xff\xff",  # int64 -1
    b"\x80\x00\x00\x00\x00\x00\x00\x00",  # int64 min
    b"\x7f\xff\xff\xff\xff\xff\xff\xff",  # int64 max
    b"\xff\xff\xff\xff\x7f",  # varint 2**35 - 1
    b"\x80\x01",  # varint 128
    b"\xff\x7f",  # varint 16383
    b"\x01",
    b"\x02",  # a bool that is not 0 or 1, compact length 1
    b"\x80",  # nullable struct marker -128, or an unfinished varint
    b"\xfe",  # marker -2
    b"\xc3\x28",  # invalid UTF-8
    b"\xed\xa0\x80",  # a UTF-16 surrogate in UTF-8
    b"\xff" * 16,  # a UUID of all ones
    b"\x01\x05\x00",  # a tagged-field section with one empty unknown tag
    b"\x02\x00\x01\x00\x01\x01\x00",  # two tags, one with a nested empty section
    b"\x7f\x01\x01\x01",  # 127 tagged fields announced
)

OPS = ("overwrite", "insert", "truncate", "flip", "byte", "delete", "dup", "splice")


def apply_op(frame: bytes, op: str, a: int, b: int, c: int, header_len: int = 0) -> bytes:
    """One mutation of ``frame``; ``a``, ``b``, ``c`` are arbitrary integers that pick where and what.

    Offsets fall in the body (after ``header_len``) three times in four.
    """
    n = len(frame)
    if n == 0:
        return TOKENS[c % len(TOKENS)]
    low = header_len if (a & 3) and header_len < n else 0
    pos = low + (a >> 2) % (n - low)
    if op == "overwrite":
        token = TOKENS[c % len(TOKENS)]
        return frame[:pos] + token + frame[pos + len(token) :]
    if op == "insert":
        return frame[:pos] + TOKENS[c % len(TOKENS)] + frame[pos:]
    if op == "truncate":
        return frame[:pos]
    if op == "flip":
        return frame[:pos] + bytes([frame[pos] ^ (1 << (c % 8))]) + frame[pos + 1 :]
    if op == "byte":
        return frame[:pos] + bytes([c & 0xFF]) + frame[pos + 1 :]
    if op == "delete":
        return frame[:pos] + frame[pos + 1 + b % 16 :]
    if op == "dup":
        chunk = frame[pos : pos + 1 + b % 32]
        return frame[:pos] + chunk + frame[pos:]
    if op == "splice":
        other = seeds()[b % len(seeds())].frame
        return frame[:pos] + other[c % (len(other) + 1) :]
    raise ValueError(op)


def random_frame(rng: random.Random) -> bytes:
    all_seeds = seeds()
    seed = all_seeds[rng.randrange(len(all_seeds))]
    frame = seed.frame
    count = 1
    while count < 4 and rng.random() < 0.4:
        count += 1
    for _ in range(count):
        op = OPS[rng.randrange(len(OPS))]
        frame = apply_op(frame, op, rng.getrandbits(30), rng.getrandbits(16), rng.getrandbits(16), seed.header_len)
    return frame


@cache
def _sweep_index() -> tuple[list[int], list[int]]:
    """Prefix sums over the rich seeds: seed i owns frames [starts[i], starts[i + 1])."""
    starts = [0]
    for seed in rich_seeds():
        starts.append(starts[-1] + (len(seed.frame) - seed.header_len) * len(SWEEP_TOKENS) * 2)
    return starts, [s.header_len for s in rich_seeds()]


def sweep_size() -> int:
    return _sweep_index()[0][-1]


def sweep_frame(k: int) -> bytes:
    """Frame ``k`` of the deterministic sweep (0 <= k < sweep_size())."""
    starts, _ = _sweep_index()
    i = bisect.bisect_right(starts, k) - 1
    seed = rich_seeds()[i]
    rest = k - starts[i]
    rest, insert = divmod(rest, 2)
    offset, token = divmod(rest, len(SWEEP_TOKENS))
    pos = seed.header_len + offset
    t = SWEEP_TOKENS[token]
    frame = seed.frame
    return frame[:pos] + t + (frame[pos:] if insert else frame[pos + len(t) :])


def frame_at(seed: int, k: int) -> bytes:
    """Frame ``k`` of a run: the sweep first, then random mutations (``seed`` picks them)."""
    if k < sweep_size():
        return sweep_frame(k)
    return random_frame(random.Random(f"{seed}:{k}"))


# ---------------------------------------------------------------- the invariant

_SUPPORTED = supported_versions()


def check_frame(frame: bytes) -> str | None:
    """None if ``frame`` keeps the invariant, else what went wrong."""
    stream = _SIZE.pack(len(frame)) + frame
    try:
        events = ServerConnection(_SUPPORTED).receive_data(stream)
    except ProtocolError:
        return None
    except Exception as exc:  # noqa: BLE001 - the finding
        return f"{type(exc).__name__}: {exc}"
    if len(events) != 1:
        return f"{len(events)} events from one frame"
    event = events[0]
    if isinstance(event, Request):
        return _agreement(frame, event)
    return None


def _agreement(frame: bytes, event: Request) -> str | None:
    """The walk and kio must end the header and the body at the same byte."""
    cls = request_class(event.api_key, event.api_version)
    header_version = request_header_version(event.api_key, event.api_version, cls.__flexible__)
    pos = 8
    if header_version:
        header_cls = HeaderV2 if header_version == 2 else HeaderV1
        found = _ends(header_cls, frame, 0)
        if isinstance(found, str):
            return found
        pos = found
    found = _ends(cls, frame, pos)
    return found if isinstance(found, str) else None


def _ends(cls: type, frame: bytes, offset: int) -> int | str | None:
    """Where ``cls`` ends by the walk, if kio agrees; a message if not."""
    try:
        walked = codec.check(cls, frame, offset)
    except codec.DecodeError:
        # decode accepted the frame, so the walk was skipped: kio alone reads
        # classes without arrays, and it is more lenient than the walk
        if codec._has_array(cls):
            return f"{cls.__name__}: decoded, but the walk refuses it"
        return None
    try:
        _, size = entity_reader(cls)(frame, offset)
    except KeyError:  # unknown tagged fields, stripped before kio saw them
        return walked
    if offset + size != walked:
        return f"{cls.__name__}: the walk ends at {walked}, kio at {offset + size}"
    return walked


# ---------------------------------------------------------------- corpus


def api_name(stream: bytes) -> str:
    if len(stream) >= 8:
        api_key, version = struct.unpack_from(">hh", stream, 4)
        try:
            return request_class(api_key, version).__module__.split(".")[2]
        except Exception:  # noqa: BLE001 - any unknown key or version
            return f"api{api_key}"
    return "short"


def save(corpus: Path, frame: bytes) -> Path:
    stream = _SIZE.pack(len(frame)) + frame
    corpus.mkdir(parents=True, exist_ok=True)
    path = corpus / f"{api_name(stream)}-{hashlib.sha1(stream).hexdigest()[:12]}.bin"
    path.write_bytes(stream)
    return path


def corpus_files(corpus: Path = CORPUS) -> list[Path]:
    return sorted(corpus.glob("*.bin"))


def check_stream(stream: bytes) -> str | None:
    """``check_frame`` for a corpus file (size prefix included)."""
    if len(stream) >= 4 and _SIZE.unpack_from(stream)[0] == len(stream) - 4:
        return check_frame(stream[4:])
    try:
        ServerConnection(_SUPPORTED).receive_data(stream)
    except ProtocolError:
        return None
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return None


# ---------------------------------------------------------------- child process

CHECKPOINT = 1000  # a child names its progress every this many frames


def run_child(seed: int, start: int, stop: int, deadline: float, locate: bool, abort_at: int | None) -> None:
    """Try frames [start, stop) until ``deadline`` (time.time()); report on stdout.

    Lines: ``P k`` (frames before k are done), ``F k`` before frame k in
    locate mode, ``X {json}`` per finding, and last ``D k seconds j``: where
    it stopped, and the slowest frame's time and number.
    """
    out = sys.stdout
    slowest, slowest_k = 0.0, start
    k = start
    while k < stop:
        if k % CHECKPOINT == 0:
            out.write(f"P {k}\n")
            out.flush()
            if time.time() > deadline:
                break
        frame = frame_at(seed, k)
        if locate:
            out.write(f"F {k}\n")
            out.flush()
        if k == abort_at:  # the runner's self-test
            os.abort()
        t0 = time.perf_counter()
        problem = check_frame(frame)
        took = time.perf_counter() - t0
        if took > slowest:
            slowest, slowest_k = took, k
        if problem is not None:
            out.write("X " + json.dumps({"k": k, "detail": problem}) + "\n")
            out.flush()
        k += 1
    out.write(f"D {k} {slowest} {slowest_k}\n")
    out.flush()


# ---------------------------------------------------------------- parent process


@dataclass
class Totals:
    frames: int = 0
    crashes: int = 0
    hangs: int = 0
    exceptions: int = 0
    slowest: float = 0.0
    slowest_k: int = -1

    def add(self, other: Totals) -> None:
        self.frames += other.frames
        self.crashes += other.crashes
        self.hangs += other.hangs
        self.exceptions += other.exceptions
        if other.slowest > self.slowest:
            self.slowest, self.slowest_k = other.slowest, other.slowest_k


@dataclass
class ChildResult:
    done: int | None  # where a child that finished stopped; None if it died or hung
    progress: int  # frames before this are known to be fine
    last_named: int | None  # the last frame named in locate mode
    findings: list
    slowest: float
    how: str  # how it died
    slowest_k: int = -1


def _run_child(args: argparse.Namespace, start: int, stop: int, deadline: float, locate: bool) -> ChildResult:
    cmd = [sys.executable, "-m", "tests.fuzz.protocol", "--child", "--seed", str(args.seed)]
    cmd += ["--start", str(start), "--stop", str(stop), "--deadline", str(deadline)]
    if locate:
        cmd.append("--locate")
    if args.self_test_abort is not None:
        cmd += ["--self-test-abort", str(args.self_test_abort)]
    env = {**os.environ, "RUST_BACKTRACE": "0", "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=Path(__file__).parents[2]
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True).start()
    result = ChildResult(None, start, None, [], 0.0, "")
    while True:
        try:
            line = lines.get(timeout=args.hang_seconds)
        except queue.Empty:  # no sign of life: a hang
            proc.kill()
            proc.wait()
            result.how = f"no progress for {args.hang_seconds:.0f} s"
            return result
        if line is None:
            break
        tag, _, rest = line.rstrip("\n").partition(" ")
        if tag == "P":
            result.progress = int(rest)
            if not locate and result.progress % 100_000 == 0 and result.progress > start:
                print(f"... frame {result.progress}", flush=True)
        elif tag == "F":
            result.last_named = int(rest)
        elif tag == "X":
            result.findings.append(json.loads(rest))
        elif tag == "D":
            done, slowest, slowest_k = rest.split()
            result.done, result.slowest, result.slowest_k = int(done), float(slowest), int(slowest_k)
    code = proc.wait()
    stderr = proc.stderr.read()
    if code != 0 or result.done is None:
        result.done = None
        how = f"signal {-code}" if code < 0 else f"exit {code}"
        result.how = f"{how}: {(stderr.strip().splitlines() or [''])[0][:200]}"
    return result


def _report(args: argparse.Namespace, kind: str, k: int, detail: str) -> None:
    path = save(args.corpus, frame_at(args.seed, k))
    print(f"{kind.upper()} frame {k}: {detail} -> {path}", flush=True)


def run_range(args: argparse.Namespace, start: int, stop: int, deadline: float) -> Totals:
    """Frames [start, stop) in one long-lived child, and a locating one after each death."""
    totals = Totals()
    while start < stop:
        result = _run_child(args, start, stop, deadline, False)
        for f in result.findings:
            totals.exceptions += 1
            _report(args, "exception", f["k"], f["detail"])
        if result.slowest > totals.slowest:
            totals.slowest, totals.slowest_k = result.slowest, result.slowest_k
        if result.done is not None:
            totals.frames += result.done - start
            return totals
        # it died or hung after its last checkpoint: find the frame
        checkpoint = result.progress
        totals.frames += checkpoint - start
        located = _run_child(args, checkpoint, min(checkpoint + CHECKPOINT, stop), float("inf"), True)
        if located.done is not None:
            print(f"FLAKY: frames [{checkpoint}, {checkpoint + CHECKPOINT}) passed when run again ({result.how})", flush=True)
            totals.frames += located.done - checkpoint
            start = located.done
            continue
        culprit = located.last_named if located.last_named is not None else checkpoint
        kind = "hang" if located.how.startswith("no progress") else "crash"
        if kind == "hang":
            totals.hangs += 1
        else:
            totals.crashes += 1
        _report(args, kind, culprit, located.how)
        totals.frames += culprit - checkpoint + 1
        start = culprit + 1
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=100_000, help="how many frames to try at most")
    parser.add_argument("--seconds", type=float, default=600, help="stop after about this long")
    parser.add_argument("--jobs", type=int, default=1, help="child processes at once")
    parser.add_argument("--seed", type=int, default=1, help="picks the random mutations")
    parser.add_argument("--hang-seconds", type=float, default=120, help="a child silent this long is hung")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="where findings are saved")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--stop", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=float("inf"), help=argparse.SUPPRESS)
    parser.add_argument("--locate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--self-test-abort", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.seed, args.start, args.stop, args.deadline, args.locate, args.self_test_abort)
        return 0

    print(f"{len(seeds())} seed frames; a sweep of {sweep_size()} frames, then random mutations (seed {args.seed})", flush=True)
    began = time.monotonic()
    deadline = time.time() + args.seconds
    jobs = max(args.jobs, 1)
    # each job takes one contiguous share of the frames
    share = -(-args.frames // jobs)
    totals = Totals()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_range, args, j * share, min((j + 1) * share, args.frames), deadline) for j in range(jobs)]
        for future in futures:
            totals.add(future.result())
    elapsed = time.monotonic() - began
    print(
        f"frames {totals.frames}  crashes {totals.crashes}  hangs {totals.hangs}  exceptions {totals.exceptions}  "
        f"seconds {elapsed:.0f}  rate {totals.frames / max(elapsed, 1e-9):.0f}/s  "
        f"slowest frame {totals.slowest * 1e3:.1f} ms (number {totals.slowest_k})",
        flush=True,
    )
    return 1 if totals.crashes + totals.hangs + totals.exceptions else 0


if __name__ == "__main__":
    sys.exit(main())
