"""Session fixtures for tests/docker: the engine, the images built from this repository."""

from __future__ import annotations

import time

import pytest

from .harness import BASE_IMAGE, ROOT, Docker, Engine, Metrics, unavailable_reason

IMAGE = "kafkalite:test"
EXAMPLES_IMAGE = "kafkalite-examples:test"


@pytest.fixture(scope="session")
def metrics():
    m = Metrics()
    yield m
    m.save()


@pytest.fixture(scope="session")
def docker(metrics) -> Docker:
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no Docker engine: {reason}")
    engine = Engine()
    t0 = time.monotonic()
    try:
        d = engine.start()
        metrics.record("engine_start_s", round(time.monotonic() - t0, 1))
        t0 = time.monotonic()
        engine.base_image()
        metrics.record("base_image_s", round(time.monotonic() - t0, 1))
        metrics.record("versions", {
            "engine": d.out("version", "--format", "{{.Server.Version}}"),
            "cli": d.out("version", "--format", "{{.Client.Version}}"),
            "compose": d.out("compose", "version", "--short"),
            "buildx": d.out("buildx", "version"),
        })
        yield d
    finally:
        try:
            if "d" in locals():
                d.cleanup()
                d.run("image", "prune", "-f", check=False)  # images replaced by this session's builds
                d.run("builder", "prune", "-f", "--keep-storage", "3gb", check=False)  # bound the cached layers
        finally:
            engine.stop()


def _build(docker: Docker, metrics: Metrics, tag: str, context, key: str) -> str:
    t0 = time.monotonic()
    docker.run("build", "-t", tag, "--build-arg", f"PYTHON_IMAGE={BASE_IMAGE}", str(context), timeout=1800)
    metrics.record(f"build_{key}_s", round(time.monotonic() - t0, 1))
    return tag


@pytest.fixture(scope="session")
def kafkalite_image(docker, metrics) -> str:
    """The broker image, from the repository's Dockerfile on the stand-in base."""
    tag = _build(docker, metrics, IMAGE, ROOT, "kafkalite")
    size = int(docker.inspect(tag, "{{.Size}}"))
    base = int(docker.inspect(BASE_IMAGE, "{{.Size}}"))
    metrics.record("image_bytes", size)
    metrics.record("base_image_bytes", base)
    metrics.record("added_to_base_bytes", size - base)
    return tag


@pytest.fixture(scope="session")
def examples_image(docker, metrics) -> str:
    """examples/Dockerfile: Python with confluent-kafka, for clients inside the Docker network."""
    return _build(docker, metrics, EXAMPLES_IMAGE, ROOT / "examples", "examples")
