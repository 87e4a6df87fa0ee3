"""Other projects' own test suites, run against kafkalite as gates.

* ``kgo``: franz-go's pkg/kgo integration tests (the module from the Go module
  proxy, at the version tests/clients/go/go.mod pins);
* ``librdkafka``: librdkafka's tests/ runner, built from Debian's source
  package of librdkafka (pinned version and checksum);
* ``kgo_cluster``, ``librdkafka_cluster``: the same on 3 brokers (franz-go's
  with ``KGO_TEST_RF=3``; librdkafka's tests that need or use 3 brokers),
  against one shared 3-node kafkalite and a 3-broker Kafka.

Each suite keeps its pass list in ``tests/peers/<suite>_expected.toml``: for
every test, its result against the reference Kafka (``python -m tests.peers
record <suite>``, ``make peers-reference``) and, for a test kafkalite is known
to fail, the reason. ``tests/peers/test_*.py`` run the suites against a fresh
kafkalite per test; docs/peer-suites.md explains both.
"""
