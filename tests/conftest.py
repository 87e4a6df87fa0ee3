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


# ``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``). A directory
# whose tests share session fixtures (a reference Kafka, a toolchain, the Docker engine) or whose
# session hooks need all of its results in one process (the conformance report) runs whole on one
# worker; every other file is a group of its own. The directories that take longest go first, so
# that neither worker is left with a long group at the end.
WHOLE_DIRECTORIES = ("docker", "peers", "conformance", "clients", "pipeline", "security", "soak", "java")


def _xdist_group(item) -> str:
    parts = item.nodeid.split("::", 1)[0].split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] in WHOLE_DIRECTORIES:
        return parts[1]
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the node ids
def pytest_collection_modifyitems(session, config, items):
    if getattr(config.option, "dist", "no") == "no":  # not distributed: collection order as written
        return
    rank = {name: i for i, name in enumerate(WHOLE_DIRECTORIES)}
    for item in items:
        if not any(m.name == "xdist_group" for m in item.iter_markers()):
            item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
    items.sort(key=lambda item: rank.get(_xdist_group(item), len(rank)))  # stable: each file keeps its order
