"""Example consumer group member: at-least-once processing with committed offsets.

    python examples/consumer_group.py --bootstrap 127.0.0.1:9092 --group order-processors --topic orders

Start it several times with the same ``--group`` and the topic's partitions
are shared between the processes; stop one and the others take its
partitions over. ``--group-protocol consumer`` uses the KIP-848 protocol
(the broker assigns partitions), ``classic`` the JoinGroup/SyncGroup one with
the cooperative-sticky assignor.

An offset is stored only after its message is processed and committed in the
background every second (and on a rebalance or exit), so a crash replays at
most the last second of messages. A message that is not a JSON order is
reported and skipped, not retried: it would fail the same way every time.
SIGTERM or Ctrl-C leave the group cleanly. The client id names the host (in
a container, the container) and the process, so replicas can be told apart.
Every option also reads an environment variable (BOOTSTRAP_SERVERS, GROUP_ID,
...), which is how docker-compose.yml configures it.

While it runs, watch the group with the admin CLI:

    kafkalite groups describe order-processors
    kafkalite groups lag order-processors
    kafkalite groups history order-processors
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time

from confluent_kafka import Consumer, KafkaError


def parse_args(argv=None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=env("BOOTSTRAP_SERVERS", "127.0.0.1:9092"), help="BOOTSTRAP_SERVERS")
    p.add_argument("--group", default=env("GROUP_ID", "order-processors"), help="GROUP_ID")
    p.add_argument("--topic", action="append", help="repeatable (TOPIC, comma-separated)")
    p.add_argument("--group-protocol", choices=["classic", "consumer"], default=env("GROUP_PROTOCOL", "classic"), help="GROUP_PROTOCOL")
    p.add_argument("--max-messages", type=int, default=int(env("MAX_MESSAGES", "0")), help="exit after this many messages, 0 for never (MAX_MESSAGES)")
    p.add_argument("--idle-exit", type=float, default=float(env("IDLE_EXIT", "0")), help="exit after this many seconds without messages, 0 for never (IDLE_EXIT)")
    args = p.parse_args(argv)
    args.topic = args.topic or [t for t in env("TOPIC", "orders").split(",") if t]
    return args


def process(message) -> None:
    """The application's work; here, parse the order. Raises ValueError (or TypeError,
    for a message without a value) when it is not a JSON object."""
    order = json.loads(message.value())
    if not isinstance(order, dict):
        raise ValueError(f"expected a JSON object, got {type(order).__name__}")


def main(argv=None) -> int:
    args = parse_args(argv)
    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "group.protocol": args.group_protocol,
        # containers all run this as pid 1: the host name (the container id) tells them apart
        "client.id": f"example-consumer-{socket.gethostname()}-{os.getpid()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,  # commits what was stored below, every auto.commit.interval.ms
        "enable.auto.offset.store": False,
        "auto.commit.interval.ms": 1000,
    }
    if args.group_protocol == "classic":
        config["partition.assignment.strategy"] = "cooperative-sticky"
    consumer = Consumer(config)
    stop = False

    def on_signal(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def on_assign(c, partitions):
        print("assigned: " + (", ".join(f"{p.topic}-{p.partition}" for p in partitions) or "-"), flush=True)

    def on_revoke(c, partitions):
        print("revoked: " + (", ".join(f"{p.topic}-{p.partition}" for p in partitions) or "-"), flush=True)

    consumer.subscribe(args.topic, on_assign=on_assign, on_revoke=on_revoke)
    processed = skipped = 0
    last_message = last_report = time.monotonic()
    try:
        while not stop:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        print(f"consumer error: {msg.error()}", file=sys.stderr, flush=True)
                    continue
                try:
                    process(msg)
                    processed += 1
                except (ValueError, TypeError) as exc:  # not JSON (JSONDecodeError is a ValueError), or no value at all
                    skipped += 1
                    print(f"skipped {msg.topic()}-{msg.partition()}@{msg.offset()}: not an order ({exc})", file=sys.stderr, flush=True)
                consumer.store_offsets(message=msg)
                last_message = time.monotonic()
                if args.max_messages and processed >= args.max_messages:
                    stop = True
                    break
            now = time.monotonic()
            if args.idle_exit and now - last_message >= args.idle_exit:
                break
            if now - last_report >= 5:
                print(f"processed {processed}, skipped {skipped}", flush=True)
                last_report = now
    finally:
        consumer.close()  # commits the stored offsets and leaves the group
    print(f"done: processed {processed}, skipped {skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
