"""Per-request decode cost on the hot path: ``python -m bench.decode_cost``.

For four typical requests (Heartbeat v4, OffsetCommit v9 with 1 topic x 10
partitions, Produce v9 with one 16 KB batch, Fetch v15 with 10 partitions) it
times, in CPU microseconds per request (best of several timeit runs):

- ``kio``: kio's native reader on the header and body alone, no checks;
- ``walk``: the bounded schema walk of ``protocol.codec`` alone, header and
  body, whether or not ``decode`` needs it for this class;
- ``before``: ``ServerConnection.parse_frame`` with ``decode`` replaced by a
  bare kio call, as it was before the walk existed;
- ``after``: ``ServerConnection.parse_frame`` as it is, which is what the
  broker runs for every request.

``before`` and ``after`` run in the same process, one after the other, so
that a busy machine weighs on both alike. It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import time
import timeit
import uuid

from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader

from broker.handlers import supported_versions
from protocol import codec, connection
from protocol.codec import build, encode, request_class
from protocol.connection import ServerConnection


def _frame(api_key: int, version: int, body: dict) -> bytes:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="bench-client")
    return encode(header) + encode(build(request_class(api_key, version), body))


def frames() -> dict[str, tuple[int, int, bytes]]:
    heartbeat = {"group_id": "group-1", "generation_id": 5, "member_id": "consumer-1-" + "a" * 36}
    commit = {
        "group_id": "group-1",
        "generation_id_or_member_epoch": 5,
        "member_id": "consumer-1-" + "a" * 36,
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": p, "committed_offset": 1000 + p, "committed_metadata": ""} for p in range(10)]}
        ],
    }
    produce = {"acks": -1, "timeout": 30000, "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": bytes(16 * 1024)}]}]}
    fetch = {
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": uuid.uuid4(),
                "partitions": [{"partition": p, "fetch_offset": 12345, "partition_max_bytes": 1048576} for p in range(10)],
            }
        ],
        "rack_id": "",
    }
    return {
        "Heartbeat v4": (12, 4, _frame(12, 4, heartbeat)),
        "OffsetCommit v9 1x10": (8, 9, _frame(8, 9, commit)),
        "Produce v9 16KB": (0, 9, _frame(0, 9, produce)),
        "Fetch v15 10 parts": (1, 15, _frame(1, 15, fetch)),
    }


def _best(fn, repeat: int) -> float:
    # CPU time of this thread, not wall time: other processes on a busy
    # machine then inflate the figures much less
    timer = timeit.Timer(fn, timer=time.thread_time)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def _kio_only_decode(cls, buf, offset=0):
    """``codec.decode`` as it was before the bounded walk: kio straight away."""
    try:
        entity, size = entity_reader(cls)(buf, offset)
    except Exception as exc:  # noqa: BLE001
        raise codec.DecodeError(str(exc)) from exc
    return entity, offset + size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    conn = ServerConnection(supported_versions())
    header_reader = entity_reader(RequestHeader)
    print(f"{'request':<22}{'bytes':>7}{'kio':>8}{'walk':>8}{'before':>9}{'after':>9}{'added':>9}   (µs per request)")
    for name, (api_key, version, frame) in frames().items():
        cls = request_class(api_key, version)
        body_reader = entity_reader(cls)

        def kio_only(frame=frame, body_reader=body_reader):
            _, n = header_reader(frame, 0)
            body_reader(frame, n)

        def walk_only(frame=frame, cls=cls):
            codec.check(cls, frame, codec.check(RequestHeader, frame, 0))

        def parse(frame=frame):
            conn.parse_frame(frame)

        kio_us = _best(kio_only, args.repeat)
        walk_us = _best(walk_only, args.repeat)
        connection.decode = _kio_only_decode
        try:
            before = _best(parse, args.repeat)
        finally:
            connection.decode = codec.decode
        after = _best(parse, args.repeat)
        print(f"{name:<22}{len(frame):>7}{kio_us:>8.2f}{walk_us:>8.2f}{before:>9.2f}{after:>9.2f}{after - before:>+9.2f}")


if __name__ == "__main__":
    main()
