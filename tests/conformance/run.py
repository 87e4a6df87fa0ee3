"""Play scenarios against two brokers that are already running, without pytest (for developing scenarios).

    python -m tests.conformance.run --kafkalite 127.0.0.1:9092 --kafka 127.0.0.1:19092 [-k SUBSTRING] [-v]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import time

from .known_differences import KNOWN_DIFFERENCES
from .registry import load_all, run
from .test_conformance import _error_step, first_difference


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafkalite", required=True)
    ap.add_argument("--kafka", required=True)
    ap.add_argument("-k", default="", help="only scenarios whose name contains this")
    ap.add_argument("-v", action="store_true", help="print every observation list")
    ap.add_argument("-j", type=int, default=1, help="scenarios in parallel")
    args = ap.parse_args()
    # the scenarios played on a SASL listener need the pair tests/conformance/conftest.py starts
    scenarios = [s for n, s in load_all().items() if args.k in n and s.listener is None]

    def one(sc):
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            a, b = pool.submit(run, sc, "kafkalite", args.kafkalite), pool.submit(run, sc, "kafka", args.kafka)
            lite, kafka = a.result(), b.result()
        return sc, lite, kafka, time.monotonic() - t

    counts: dict[str, int] = {}
    with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        for sc, lite, kafka, took in pool.map(one, scenarios):
            x, y = lite.observations + _error_step(lite), kafka.observations + _error_step(kafka)
            status = "KAFKA-ERROR" if kafka.error else "pass" if x == y else ("known" if sc.name in KNOWN_DIFFERENCES else "DIFF")
            counts[status] = counts.get(status, 0) + 1
            print(f"{status:11} {took:5.1f}s {sc.name}", flush=True)
            if status not in ("pass",):
                print("   ", first_difference(x, y).replace("\n", "\n    "))
                if kafka.error:
                    print(kafka.error)
                if lite.error and status != "pass":
                    print("    kafkalite raised:", lite.error.strip().splitlines()[-1])
            if args.v:
                print("    kafkalite:", json.dumps(x))
                print("    kafka:    ", json.dumps(y))
    print(counts)


if __name__ == "__main__":
    main()
