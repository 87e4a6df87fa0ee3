"""Example producer: writes JSON "orders" to a topic, keyed by customer.

    python examples/producer.py --bootstrap 127.0.0.1:9092 --topic orders --rate 20

It creates the topic first (``--partitions``, default 3) unless it exists, then
produces ``--rate`` messages a second, forever or until ``--count`` messages
are acknowledged. SIGTERM or Ctrl-C flush what is pending and exit. Every
option also reads an environment variable (BOOTSTRAP_SERVERS, TOPIC, ...), which
is how docker-compose.yml configures it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def parse_args(argv=None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=env("BOOTSTRAP_SERVERS", "127.0.0.1:9092"), help="BOOTSTRAP_SERVERS")
    p.add_argument("--topic", default=env("TOPIC", "orders"), help="TOPIC")
    p.add_argument("--partitions", type=int, default=int(env("PARTITIONS", "3")), help="PARTITIONS, used when creating the topic")
    p.add_argument("--rate", type=float, default=float(env("RATE", "10")), help="messages a second, 0 for as fast as possible (RATE)")
    p.add_argument("--count", type=int, default=int(env("COUNT", "0")), help="stop after this many messages, 0 for never (COUNT)")
    return p.parse_args(argv)


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=15)[topic]
    try:
        future.result(timeout=30)
        print(f"created topic {topic} with {partitions} partitions", flush=True)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise


def main(argv=None) -> int:
    args = parse_args(argv)
    ensure_topic(args.bootstrap, args.topic, args.partitions)
    stop = False

    def on_signal(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    acked = failed = 0

    def on_delivery(err, msg):
        nonlocal acked, failed
        if err is None:
            acked += 1
        else:
            failed += 1
            print(f"delivery failed: {err}", file=sys.stderr, flush=True)

    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True, "linger.ms": 5, "client.id": "example-producer"})
    sent = 0
    last_report = time.monotonic()
    started = time.monotonic()
    while not stop and (args.count == 0 or sent < args.count):
        order = {"order_id": sent, "customer": f"customer-{random.randrange(20)}", "amount": round(random.uniform(1, 100), 2), "ts": time.time()}
        try:
            producer.produce(args.topic, key=order["customer"].encode(), value=json.dumps(order).encode(), on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.1)
            continue
        producer.poll(0)
        if args.rate > 0:
            # pace to the rate from the start, so slow rounds catch up
            delay = started + sent / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        if time.monotonic() - last_report >= 5:
            print(f"produced {sent}, acknowledged {acked}, failed {failed}", flush=True)
            last_report = time.monotonic()
    remaining = producer.flush(30)
    print(f"done: produced {sent}, acknowledged {acked}, failed {failed}, unflushed {remaining}", flush=True)
    return 0 if failed == 0 and remaining == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
