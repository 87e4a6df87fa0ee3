def pytest_configure(config):
    config.addinivalue_line("markers", "soak: long-running churn against a live group (bench/churn.py); deselect with -m 'not soak'")
    config.addinivalue_line("markers", "reference: the same test run against a real Apache Kafka broker, 4.4 by default (tests/reference_kafka.py)")
