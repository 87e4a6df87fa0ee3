PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install run test spark-jars test-unit reference-kafka test-conformance test-conformance-4.1 test-clients test-peers peers-reference peers-kafkalite compat bench bench-compare fuzz soak soak-starved reliability reliability-quick crashpoints lint clean test-docker docker-engine docker-engine-stop docker-measure

# compiled bytecode for the project's own modules, as an installed package has it: a checkout run
# under PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module at every start
install: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 broker protocol storage bench pipeline kafkalite tests > /dev/null

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: install
	$(BIN)/kafkalite serve

spark-jars: install
	$(BIN)/python -m pipeline.jars --if-possible

test: install spark-jars
	$(BIN)/python -m tests.parallel

test-unit: install
	$(BIN)/pytest -q tests/unit

# the image, docker-compose.yml, docker-compose.cluster.yml and kafkalite.testcontainers with a real engine (also part of make test);
# tools/docker/engine.sh fetches and starts the engine (root, Debian apt), cached in ~/.cache/kafkalite/docker
test-docker: install
	$(BIN)/pytest -q tests/docker

# the tests' engine by hand: then `eval "$$(tools/docker/engine.sh env)"` for docker and docker compose
docker-engine:
	tools/docker/engine.sh start

docker-engine-stop:
	tools/docker/engine.sh stop

# start-up, health and idle-memory figures of the image (docs/benchmarks.md, Docker)
docker-measure: install
	$(BIN)/python -m tests.docker.measure --build --runs 10

# the reference broker is Apache Kafka 4.4.0; KAFKALITE_REFERENCE_KAFKA_VERSION=4.x.y picks another release
# (its jars are cached per version in ~/.cache/kafkalite/kafka-<version>)
reference-kafka: install
	$(BIN)/python -m tests.reference_kafka

test-conformance: install
	$(BIN)/pytest -q tests/conformance

# the same suite against Apache Kafka 4.1.0: build/conformance-4.1/report.json and docs/compatibility-4.1.md
test-conformance-4.1: install
	KAFKALITE_REFERENCE_KAFKA_VERSION=4.1.0 $(BIN)/pytest -q tests/conformance

test-clients: install
	$(BIN)/pytest -q -m "not reference" tests/clients tests/integration/test_java_clients.py

# franz-go's kgo and librdkafka's own test suites against kafkalite, gated by tests/peers/*_expected.toml
# (also part of make test; docs/peer-suites.md)
test-peers: install
	$(BIN)/pytest -q tests/peers

# re-record which peer-suite tests pass on the reference Kafka (tests/reference_kafka.py) into the pass lists
peers-reference: install
	$(BIN)/python -m tests.peers record kgo
	$(BIN)/python -m tests.peers record librdkafka
	$(BIN)/python -m tests.peers record kgo --cluster
	$(BIN)/python -m tests.peers record librdkafka --cluster

# every listed peer-suite test against kafkalite, with the totals written into the pass lists' headers
peers-kafkalite: install
	-$(BIN)/python -m tests.peers run kgo
	-$(BIN)/python -m tests.peers run librdkafka
	-$(BIN)/python -m tests.peers run kgo --cluster
	-$(BIN)/python -m tests.peers run librdkafka --cluster

compat: install
	-$(BIN)/pytest -q -m "not reference" tests/clients tests/integration/test_java_clients.py
	$(BIN)/python -m tests.clients.report

bench: install
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.groups
	$(BIN)/python -m bench.plugin_start

# kafkalite vs Apache Kafka (and kfake, built from bench/kfake with go when go is there); e.g.
# make bench-compare BENCH_COMPARE_ARGS="--quick --out /tmp/compare.md" for a short check that leaves docs/ alone
bench-compare: install
	$(BIN)/python -m bench.compare $(BENCH_COMPARE_ARGS)

# the protocol-layer fuzzer for longer than make test runs it (findings are saved to tests/fuzz/corpus/)
fuzz: install
	$(BIN)/python -m tests.fuzz.protocol --frames 1000000 --seconds 1800

# ten minutes of consumer-group churn per broker and protocol, kafkalite beside the reference Kafka
soak: install
	$(BIN)/python -m bench.churn --check --broker kafkalite --protocol classic  --members 50 --seconds 600 --json build/soak/kafkalite-classic.json
	$(BIN)/python -m bench.churn --check --broker kafkalite --protocol consumer --members 50 --seconds 600 --json build/soak/kafkalite-consumer.json
	$(BIN)/python -m bench.churn --check --broker kafka     --protocol classic  --members 50 --seconds 600 --json build/soak/kafka-classic.json
	$(BIN)/python -m bench.churn --check --broker kafka     --protocol consumer --members 50 --seconds 600 --json build/soak/kafka-consumer.json
	$(MAKE) soak-starved

# issue 23's starvation run: 150 s of churn beside four busy-loop CPU hogs, 1 s heartbeats, 6 s (classic) and 10 s (KIP-848) sessions
soak-starved: install
	$(BIN)/python -m bench.churn --check --broker kafkalite --protocol classic  --members 50 --seconds 150 --hog 4 --classic-session-ms 6000 --loop-monitor --json build/soak/starved-kafkalite-classic.json
	$(BIN)/python -m bench.churn --check --broker kafkalite --protocol consumer --members 50 --seconds 150 --hog 4 --loop-monitor --json build/soak/starved-kafkalite-consumer.json
	$(BIN)/python -m bench.churn --check --broker kafka     --protocol classic  --members 50 --seconds 150 --hog 4 --classic-session-ms 6000 --json build/soak/starved-kafka-classic.json
	$(BIN)/python -m bench.churn --check --broker kafka     --protocol consumer --members 50 --seconds 150 --hog 4 --json build/soak/starved-kafka-consumer.json

# docs/reliability.md: fuzzers, memory bounds, kill -9 and churn figures (about an hour; --quick for minutes)
reliability: install
	$(BIN)/python -m bench.reliability

reliability-quick: install
	$(BIN)/python -m bench.reliability --quick --out /tmp/reliability-quick.md

# SIGKILL at every named write point (storage/crashpoints.py), 20 kills each, then restart and check
# (make test runs 2 each: tests/integration/test_crash_points.py); docs/reliability.md, "Crash points"
crashpoints: install
	$(BIN)/python -m bench.crashpoints --kills 20 --jobs 2 --json build/crashpoints.json

lint: install
	$(BIN)/ruff check broker protocol storage bench tests pipeline kafkalite

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
