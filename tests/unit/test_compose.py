"""The container files, tested without a Docker engine.

- ``docker-compose.yml`` and ``docker-compose.cluster.yml`` validate against the Compose Specification's JSON
  schema. The schema is the copy that the ``check-jsonschema`` package ships
  (``check_jsonschema/builtin_schemas/vendor/compose-spec.json``, taken from
  the compose-spec project), installed from PyPI with the test extras; nothing
  is vendored here.
- Its ``KAFKALITE_*`` environment is a configuration the broker accepts, and
  the ports, volume and example services agree with it.
- The Dockerfile's exact ENTRYPOINT + CMD, with the image's ENV, starts a
  broker outside a container (against a temporary data directory) that
  prints READY; the HEALTHCHECK command passes while it runs and fails once
  it has stopped on the STOPSIGNAL. The compose service's environment boots
  the same way, and each listener advertises what compose says.
- ``docker-compose.cluster.yml`` (``kafkalite serve --nodes 3``): its environment
  is a 3-node configuration, its published port range is exactly the nodes'
  EXTERNAL ports (host side equal to container side), ``KAFKALITE_BOOTSTRAP``
  names every node, and the same environment boots three nodes outside a
  container, each advertising its own ports, with the healthcheck command
  passing while the cluster runs and failing once it has stopped.

What this cannot show: that ``docker build`` succeeds, or how the image
behaves under a real engine (volumes, networking, health states); tests/docker
does that with a real engine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from broker.admin.client import AdminClient
from broker.cli import config_from_args

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
CLUSTER_COMPOSE = ROOT / "docker-compose.cluster.yml"
DOCKERFILE = ROOT / "Dockerfile"
# variables read by the admin CLI rather than by `kafkalite serve`
ADMIN_VARIABLES = {"KAFKALITE_BOOTSTRAP"}


def compose_schema() -> dict:
    ref = resources.files("check_jsonschema") / "builtin_schemas" / "vendor" / "compose-spec.json"
    return json.loads(ref.read_text())


def load_compose(text: str | None = None, path: Path = COMPOSE) -> dict:
    return YAML(typ="safe").load(path.read_text() if text is None else text)


def schema_errors(document: dict) -> list[str]:
    schema = compose_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in cls(schema).iter_errors(document)]


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def interpolate(value: str, environ: dict | None = None) -> str:
    """Compose's ``${VAR}`` / ``${VAR:-default}``, as ``docker compose`` would resolve them."""
    environ = environ or {}
    return _VAR.sub(lambda m: environ.get(m.group(1)) or (m.group(2) or ""), value)


# ---------------------------------------------------------------- Dockerfile


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined."""
    lines, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    out: list[tuple[str, str]] = []
    for line in lines:
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            out = []  # only the last stage is the image
        out.append((word.upper(), rest.strip()))
    return out


def exec_form(instructions, name: str) -> list[str]:
    values = [v for k, v in instructions if k == name]
    assert values, f"no {name} in the Dockerfile"
    value = values[-1]
    if name == "HEALTHCHECK":
        value = value[value.index("CMD ") + 4 :]
    parsed = json.loads(value)
    assert isinstance(parsed, list), f"{name} should use the exec (JSON) form"
    return parsed


def image_env(instructions) -> dict[str, str]:
    env = {}
    for k, v in instructions:
        if k == "ENV":
            for item in shlex.split(v):
                key, _, val = item.partition("=")
                env[key] = val
    return env


class Broker:
    """The Dockerfile's ENTRYPOINT + CMD run as a plain process.

    The broker prints ``READY host:port`` and then ``LISTENER NAME host:port``
    for each listener; ``listeners`` maps the names to the bound ports.
    """

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, listeners: int = 1) -> None:
        exe = shutil.which(argv[0], path=env["PATH"])
        assert exe, f"{argv[0]!r} is not on PATH: install the project (pip install -e .)"
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        self.lines: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        with self._changed:
            ready = self._changed.wait_for(lambda: len(self.lines) >= 1 + listeners or self.proc.poll() is not None, timeout=30)
        if not ready or not self.lines or not self.lines[0].startswith("READY "):
            self.proc.kill()
            raise AssertionError(f"no READY line: {self.lines!r}\n{''.join(self.stderr[-30:])}")
        self.port = int(self.lines[0].rsplit(":", 1)[1])
        self.listeners = {}
        for line in self.lines[1:]:
            _, name, address = line.split()
            self.listeners[name] = int(address.rsplit(":", 1)[1])

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.strip())
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(30)


def _base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKALITE_")}
    # the image has kafkalite on PATH; here it is the virtualenv's console script
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["HOME"] = str(tmp_path)
    return env


# ==================================================================== compose


def test_compose_file_validates_against_the_compose_specification():
    assert schema_errors(load_compose()) == []


def test_the_schema_check_rejects_a_broken_file():
    broken = load_compose()
    broken["services"]["consumer"]["depends_on"]["kafkalite"]["condition"] = "service_ready"
    broken["services"]["kafkalite"]["envirnoment"] = {}
    errors = schema_errors(broken)
    assert any("service_ready" in e for e in errors) and any("envirnoment" in e for e in errors), errors


def _kafkalite_service() -> dict:
    return load_compose()["services"]["kafkalite"]


def _service_env(service: dict, environ: dict | None = None) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v), environ) for k, v in env.items()}


def test_compose_environment_is_a_configuration_the_broker_accepts():
    merged = {**image_env(dockerfile_instructions()), **_service_env(_kafkalite_service())}
    for name in merged:
        if name.startswith("KAFKALITE_") and name not in ADMIN_VARIABLES:
            field = name[len("KAFKALITE_") :].lower()
            assert hasattr(config_from_args(["serve"], environ={}), field), f"{name} is not a broker setting"
    cfg = config_from_args(["serve"], environ=merged)
    specs = {s.name: s for s in cfg.listener_specs()}
    assert set(specs) == {"INTERNAL", "EXTERNAL"}
    assert specs["INTERNAL"].advertised() == ("kafkalite", 9092)
    assert specs["EXTERNAL"].advertised() == ("localhost", 9094)
    external = config_from_args(["serve"], environ={**merged, **_service_env(_kafkalite_service(), {"KAFKALITE_EXTERNAL_HOST": "broker.example"})})
    assert {s.name: s.advertised() for s in external.listener_specs()}["EXTERNAL"] == ("broker.example", 9094)


def test_compose_ports_volume_and_healthcheck_agree_with_the_configuration():
    doc = load_compose()
    svc = doc["services"]["kafkalite"]
    env = _service_env(svc)
    listeners = {s.name: s for s in config_from_args(["serve"], environ=env).listener_specs()}
    # the host reaches the EXTERNAL listener on the port it advertises
    published = {}
    for port in svc["ports"]:
        *host_side, container = interpolate(str(port)).split(":")
        published[int(container)] = int(host_side[-1])
    assert published == {listeners["EXTERNAL"].port: listeners["EXTERNAL"].advertised()[1]}
    # a named volume holds the data directory
    (mount,) = svc["volumes"]
    volume, target = mount.split(":")[:2]
    assert volume in doc["volumes"] and target == env["KAFKALITE_DATA_DIR"]
    # the healthcheck is the CLI's, against a listener that binds every address
    assert svc["healthcheck"]["test"][1:] == ["kafkalite", "health"]
    host, port = env["KAFKALITE_BOOTSTRAP"].rsplit(":", 1)
    assert host == "127.0.0.1" and any(s.port == int(port) and s.host == "0.0.0.0" for s in listeners.values())


def test_example_services_run_the_examples_against_the_internal_listener():
    doc = load_compose()
    internal = "%s:%d" % {s.name: s for s in config_from_args(["serve"], environ=_service_env(doc["services"]["kafkalite"])).listener_specs()}["INTERNAL"].advertised()
    examples = {name: svc for name, svc in doc["services"].items() if name != "kafkalite"}
    assert {"producer", "consumer"} <= set(examples)
    # one service builds each image (the consumer runs the producer's)
    contexts = {}
    for svc in examples.values():
        if "build" in svc:
            build = svc["build"]
            assert svc["image"] not in contexts, f"{svc['image']} is built twice"
            contexts[svc["image"]] = ROOT / (build if isinstance(build, str) else build["context"])
    for name, svc in examples.items():
        context = contexts[svc["image"]]
        assert (context / "Dockerfile").is_file()
        script = svc["command"][-1]
        assert (context / script).is_file(), f"{name}: {script} is not in {context}"
        assert _service_env(svc)["BOOTSTRAP_SERVERS"] == internal
        assert svc["depends_on"]["kafkalite"]["condition"] == "service_healthy"
        assert svc["profiles"] == ["examples"]
    assert examples["consumer"]["deploy"]["replicas"] >= 2


# ==================================================================== Dockerfile


def test_dockerfile_copies_every_package_and_runs_as_a_non_root_user():
    text = DOCKERFILE.read_text()
    for package in ("broker", "protocol", "storage"):
        assert f"COPY {package} ./{package}" in text
        assert (ROOT / package / "__init__.py").is_file()
    ignore = (ROOT / ".dockerignore").read_text().split()
    for needed in ("pyproject.toml", "README.md", "broker", "protocol", "storage"):
        assert f"!{needed}" in ignore
    instructions = dockerfile_instructions()
    users = [v for k, v in instructions if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    volumes = [json.loads(v) for k, v in instructions if k == "VOLUME"]
    assert volumes and image_env(instructions)["KAFKALITE_DATA_DIR"] in volumes[-1]
    assert exec_form(instructions, "HEALTHCHECK")[:2] == ["kafkalite", "health"]


def test_dockerfile_entrypoint_starts_a_broker_outside_a_container(tmp_path):
    instructions = dockerfile_instructions()
    argv = exec_form(instructions, "ENTRYPOINT") + exec_form(instructions, "CMD")
    health = exec_form(instructions, "HEALTHCHECK")
    stop_signal = getattr(signal, dict(instructions).get("STOPSIGNAL", "SIGTERM"))
    env = {**_base_env(tmp_path), **image_env(instructions)}
    # the image binds 0.0.0.0:9092 and keeps data in a volume; here loopback, any port, a temp dir
    env["KAFKALITE_LISTENERS"] = "PLAINTEXT://127.0.0.1:0"
    env["KAFKALITE_DATA_DIR"] = str(tmp_path / "data")
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    broker = Broker(argv, env, workdir)
    try:
        env["KAFKALITE_BOOTSTRAP"] = f"127.0.0.1:{broker.port}"
        ok = subprocess.run(health, env=env, capture_output=True, text=True, timeout=30)
        assert ok.returncode == 0, ok.stderr
        assert (tmp_path / "data").is_dir() and any((tmp_path / "data").iterdir())
    finally:
        rc = broker.stop(stop_signal)
    assert rc == 0, "".join(broker.stderr[-20:])
    # KAFKALITE_LOG_FORMAT=json from the image: every log line is JSON
    assert broker.stderr and all(json.loads(line)["event"] for line in broker.stderr if line.strip())
    down = subprocess.run(health, env=env, capture_output=True, text=True, timeout=30)
    assert down.returncode == 1 and "unhealthy" in down.stderr


def test_compose_environment_boots_and_each_listener_advertises_its_address(tmp_path):
    instructions = dockerfile_instructions()
    argv = exec_form(instructions, "ENTRYPOINT") + exec_form(instructions, "CMD")
    env = {**_base_env(tmp_path), **image_env(instructions), **_service_env(_kafkalite_service())}
    # same listeners and advertised addresses, bound to loopback on free ports
    env["KAFKALITE_LISTENERS"] = re.sub(r"0\.0\.0\.0:\d+", "127.0.0.1:0", env["KAFKALITE_LISTENERS"])
    env["KAFKALITE_DATA_DIR"] = str(tmp_path / "data")
    broker = Broker(argv, env, tmp_path, listeners=2)
    try:
        assert set(broker.listeners) == {"INTERNAL", "EXTERNAL"}, broker.lines
        for name, expected in (("INTERNAL", ("kafkalite", 9092)), ("EXTERNAL", ("localhost", 9094))):
            with AdminClient(f"127.0.0.1:{broker.listeners[name]}") as client:
                (b,) = client.metadata([]).brokers
                assert (b.host, b.port) == expected
    finally:
        assert broker.stop(signal.SIGTERM) == 0


@pytest.mark.parametrize("path", ["examples/producer.py", "examples/consumer_group.py"])
def test_examples_show_their_help(path):
    out = subprocess.run([sys.executable, str(ROOT / path), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--bootstrap" in out.stdout


# ==================================================================== the cluster compose file

CLUSTER_NODES = 3


def _cluster_service() -> dict:
    return load_compose(path=CLUSTER_COMPOSE)["services"]["kafkalite"]


def _port_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def _published_ranges(svc: dict, environ: dict | None = None) -> list[tuple[str, list[int], list[int]]]:
    """(host address, host ports, container ports) of each ``ports:`` entry, interpolated."""
    out = []
    for entry in svc["ports"]:
        address, host, container = interpolate(str(entry), environ).split(":")
        out.append((address, _port_range(host), _port_range(container)))
    return out


def test_cluster_compose_file_validates_against_the_compose_specification():
    doc = load_compose(path=CLUSTER_COMPOSE)
    assert schema_errors(doc) == []
    broken = load_compose(path=CLUSTER_COMPOSE)
    broken["services"]["kafkalite"]["healthcheck"]["start_intervall"] = "500ms"
    assert any("start_intervall" in e for e in schema_errors(broken))


def test_cluster_compose_environment_is_a_three_node_configuration_the_broker_accepts():
    merged = {**image_env(dockerfile_instructions()), **_service_env(_cluster_service())}
    for name in merged:
        if name.startswith("KAFKALITE_") and name not in ADMIN_VARIABLES:
            field = name[len("KAFKALITE_") :].lower()
            assert hasattr(config_from_args(["serve"], environ={}), field), f"{name} is not a broker setting"
    cfg = config_from_args(["serve"], environ=merged)
    assert cfg.nodes == CLUSTER_NODES
    specs = {s.name: s for s in cfg.listener_specs()}
    assert set(specs) == {"INTERNAL", "EXTERNAL"}
    assert (specs["INTERNAL"].host, specs["INTERNAL"].port, specs["INTERNAL"].advertised()) == ("0.0.0.0", 9092, ("kafkalite", 9092))
    assert (specs["EXTERNAL"].host, specs["EXTERNAL"].port, specs["EXTERNAL"].advertised()) == ("0.0.0.0", 19092, ("localhost", 19092))
    # KAFKALITE_EXTERNAL_PORT moves the bound and the advertised port together (the container's ports are the host's)
    moved = {**merged, **_service_env(_cluster_service(), {"KAFKALITE_EXTERNAL_PORT": "29192", "KAFKALITE_EXTERNAL_HOST": "broker.example"})}
    external = {s.name: s for s in config_from_args(["serve"], environ=moved).listener_specs()}["EXTERNAL"]
    assert (external.port, external.advertised()) == (29192, ("broker.example", 29192))


@pytest.mark.parametrize("environ", [{}, {"KAFKALITE_EXTERNAL_PORT": "29192", "KAFKALITE_EXTERNAL_PORT_LAST": "29194"}], ids=["defaults", "moved"])
def test_cluster_compose_publishes_every_nodes_external_port_and_bootstraps_from_every_node(environ):
    doc = load_compose(path=CLUSTER_COMPOSE)
    svc = doc["services"]["kafkalite"]
    env = _service_env(svc, environ)
    listeners = {s.name: s for s in config_from_args(["serve"], environ=env).listener_specs()}
    # node i serves each listener on its port + i - 1 (docs/multinode.md)
    external = [listeners["EXTERNAL"].port + i for i in range(CLUSTER_NODES)]
    internal = [listeners["INTERNAL"].port + i for i in range(CLUSTER_NODES)]
    assert not set(external) & set(internal), "the two listeners' port ranges overlap"
    # every node's EXTERNAL port is published on loopback, the host's port equal to the container's,
    # since each node advertises the port it binds; INTERNAL is not published
    assert _published_ranges(svc, environ) == [("127.0.0.1", external, external)]
    assert listeners["EXTERNAL"].advertised()[1] == external[0]
    # the admin CLI (and the healthcheck's neighbours) reach every node over loopback
    assert env["KAFKALITE_BOOTSTRAP"].split(",") == [f"127.0.0.1:{p}" for p in internal]
    assert listeners["INTERNAL"].host == "0.0.0.0"


def test_cluster_compose_volume_and_healthcheck():
    doc = load_compose(path=CLUSTER_COMPOSE)
    svc = doc["services"]["kafkalite"]
    env = _service_env(svc)
    (mount,) = svc["volumes"]
    volume, target = mount.split(":")[:2]
    assert volume in doc["volumes"] and target == env["KAFKALITE_DATA_DIR"]
    assert volume != "kafkalite-data" and doc["name"] != load_compose()["name"], "shares a volume or project with docker-compose.yml"
    kind, script = svc["healthcheck"]["test"]
    assert kind == "CMD-SHELL" and script.startswith("kafkalite cluster --json nodes |"), script
    assert svc["healthcheck"]["start_interval"] == "500ms"
    assert svc["image"] == _kafkalite_service()["image"] and svc["build"] == _kafkalite_service()["build"]


class Cluster:
    """The Dockerfile's ENTRYPOINT + CMD with ``nodes = 3``: ``NODE id address pid`` lines, then READY."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        self.lines: list[str] = []
        ready = threading.Event()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

        def read() -> None:
            for line in self.proc.stdout:
                self.lines.append(line.strip())
                if line.startswith("READY "):
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or not any(line.startswith("READY ") for line in self.lines):
            self.proc.kill()
            raise AssertionError(f"no READY line: {self.lines!r}\n{''.join(self.stderr[-30:])}")
        self.nodes = {int(w[1]): w[2] for w in (line.split() for line in self.lines) if w[0] == "NODE"}

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def test_cluster_compose_environment_boots_three_nodes_and_its_healthcheck_passes(tmp_path):
    from tests.ports import free_ports_in_a_row

    instructions = dockerfile_instructions()
    argv = exec_form(instructions, "ENTRYPOINT") + exec_form(instructions, "CMD")
    svc = _cluster_service()
    internal, external = free_ports_in_a_row(CLUSTER_NODES), free_ports_in_a_row(CLUSTER_NODES)
    # the external port as compose's variables move it; INTERNAL bound to free loopback ports
    env = {**_base_env(tmp_path), **image_env(instructions),
           **_service_env(svc, {"KAFKALITE_EXTERNAL_PORT": str(external), "KAFKALITE_EXTERNAL_PORT_LAST": str(external + CLUSTER_NODES - 1)})}
    env["KAFKALITE_LISTENERS"] = env["KAFKALITE_LISTENERS"].replace("0.0.0.0:9092", f"127.0.0.1:{internal}").replace("0.0.0.0:", "127.0.0.1:")
    env["KAFKALITE_BOOTSTRAP"] = ",".join(f"127.0.0.1:{internal + i}" for i in range(CLUSTER_NODES))
    env["KAFKALITE_DATA_DIR"] = str(tmp_path / "data")
    health = ["sh", "-c", svc["healthcheck"]["test"][1]]
    cluster = Cluster(argv, env, tmp_path)
    try:
        assert cluster.nodes == {i: f"kafkalite:{9091 + i}" for i in range(1, CLUSTER_NODES + 1)}, cluster.lines
        ok = subprocess.run(health, env=env, capture_output=True, text=True, timeout=30)
        assert ok.returncode == 0, ok.stderr
        for node in range(CLUSTER_NODES):
            for port, expected in ((external + node, {i: ("localhost", external + i - 1) for i in cluster.nodes}),
                                   (internal + node, {i: ("kafkalite", 9091 + i) for i in cluster.nodes})):
                with AdminClient(f"127.0.0.1:{port}") as client:
                    assert {b.node_id: (b.host, b.port) for b in client.metadata([]).brokers} == expected, port
    finally:
        rc = cluster.stop()
    assert rc == 0, "".join(cluster.stderr[-20:])
    down = subprocess.run(health, env=env, capture_output=True, text=True, timeout=30)
    assert down.returncode != 0
