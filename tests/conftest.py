import pytest

from tests.broker_process import BrokerProcess


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    if b.proc is not None:
        b.stop()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a module's read-mostly tests (each test uses its own topics)."""
    b = BrokerProcess(tmp_path_factory.mktemp("data")).start()
    yield b
    if b.proc is not None:
        b.stop()

