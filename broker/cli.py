"""``kafkalite`` command line: ``kafkalite serve [flags]``, the admin commands, ``kafkalite certs``.

Every flag can also be set through ``KAFKALITE_<NAME>`` (for example
``KAFKALITE_PORT=0``) or a TOML file (``--config``); a flag given on the
command line wins, then ``--set``, then the variables, then the file. Kafka's
names work too (``--set num.partitions=3``): see docs/configuration.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from .config import BrokerConfig, load_config

# broker.admin.cli.COMMANDS, named here so that ``serve`` need not import the admin tool
# (tests/unit/test_startup_imports.py checks that the two agree)
ADMIN_COMMANDS = ("topics", "groups", "transactions", "health")


def package_version() -> str:
    """kafkalite's version: the installed package's metadata, else (a source checkout run with
    PYTHONPATH) pyproject.toml's, else "unknown". Imported only when asked for: serving never needs it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafkalite")
    except PackageNotFoundError:
        pass
    try:
        import tomllib

        with open(Path(__file__).resolve().parent.parent / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``, with the version looked up only when the flag is given."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"kafkalite {package_version()}")
        parser.exit(0)


def _parser(admin: bool = True) -> argparse.ArgumentParser:
    """The whole command line. ``admin=False`` (what ``serve`` uses) gives the admin
    subcommands as bare names: the same usage line and errors for ``serve``, without
    importing broker.admin."""
    p = argparse.ArgumentParser(prog="kafkalite", description="A Kafka-wire-compatible broker.")
    p.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    s = sub.add_parser("serve", help="run the broker")
    s.add_argument("--host", help="address to listen on (KAFKALITE_HOST, default 127.0.0.1)")
    s.add_argument("--port", type=int, help="port to listen on, 0 for any free port (KAFKALITE_PORT, default 9092)")
    s.add_argument("--data-dir", type=Path, help="where logs live (KAFKALITE_DATA_DIR, default ./data)")
    s.add_argument("--advertised-host", help="host given to clients in Metadata (KAFKALITE_ADVERTISED_HOST)")
    s.add_argument("--advertised-port", type=int, help="port given to clients in Metadata (KAFKALITE_ADVERTISED_PORT)")
    s.add_argument("--nodes", type=int, help="run a cluster of N broker processes on this host, node i on the base port + i - 1 (KAFKALITE_NODES, default 1)")
    s.add_argument("--restart-nodes", action="store_true", default=None, help="with --nodes: the controller restarts a node that died")
    s.add_argument("--log-format", choices=["json", "console"], help="KAFKALITE_LOG_FORMAT, default console")
    s.add_argument("--log-level", help="debug, info, warning or error (KAFKALITE_LOG_LEVEL, default info)")
    s.add_argument("--fsync", choices=["always", "interval", "never"], help="fsync policy (KAFKALITE_FSYNC, default interval)")
    s.add_argument("--fsync-interval-ms", type=int, help="KAFKALITE_FSYNC_INTERVAL_MS, default 1000")
    s.add_argument("--num-partitions", type=int, help="partitions of auto-created topics (KAFKALITE_NUM_PARTITIONS, default 1)")
    s.add_argument(
        "--auto-create-topics",
        choices=["true", "false"],
        help="create unknown topics on Metadata (KAFKALITE_AUTO_CREATE_TOPICS, default true)",
    )
    s.add_argument("--max-frame-bytes", type=int, help="largest request accepted (KAFKALITE_MAX_FRAME_BYTES, default 100 MiB)")
    s.add_argument("--metrics-port", type=int, help="serve Prometheus metrics at http://host:PORT/metrics, 0 for any free port (KAFKALITE_METRICS_PORT, default off)")
    s.add_argument("--metrics-host", help="address the metrics endpoint binds (KAFKALITE_METRICS_HOST, default the first listener's host)")
    li = s.add_argument_group("listeners", "named listeners, as Kafka's listeners and advertised.listeners; they replace --host/--port")
    li.add_argument("--listener", dest="listeners", action="append", metavar="NAME://HOST:PORT", help="a listener; repeat for more; the first one is named by the READY line (KAFKALITE_LISTENERS, comma-separated)")
    li.add_argument("--advertised-listener", dest="advertised_listeners", action="append", metavar="NAME://HOST:PORT", help="the address given to clients of listener NAME (KAFKALITE_ADVERTISED_LISTENERS)")
    c = s.add_argument_group("configuration", "CLI flags win over KAFKALITE_* variables, which win over the config file")
    c.add_argument("--config", dest="config_file", type=Path, metavar="PATH", help="a TOML file of settings, kafkalite or Kafka names (KAFKALITE_CONFIG)")
    c.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE", help="any setting, kafkalite or Kafka name (group.initial.rebalance.delay.ms=3000); repeatable; see docs/configuration.md")
    g = s.add_argument_group("group coordinator")
    g.add_argument("--group-initial-rebalance-delay-ms", type=int, help="group.initial.rebalance.delay.ms (KAFKALITE_GROUP_INITIAL_REBALANCE_DELAY_MS, default 0)")
    g.add_argument("--offsets-topic-num-partitions", type=int, help="partitions of __consumer_offsets when first created (KAFKALITE_OFFSETS_TOPIC_NUM_PARTITIONS, default 50)")
    g.add_argument("--group-min-session-timeout-ms", type=int, help="KAFKALITE_GROUP_MIN_SESSION_TIMEOUT_MS, default 6000")
    g.add_argument("--group-max-session-timeout-ms", type=int, help="KAFKALITE_GROUP_MAX_SESSION_TIMEOUT_MS, default 1800000")
    g.add_argument("--group-max-size", type=int, help="KAFKALITE_GROUP_MAX_SIZE, default unlimited")
    g.add_argument("--offsets-retention-minutes", type=int, help="KAFKALITE_OFFSETS_RETENTION_MINUTES, default 10080 (7 days)")
    g.add_argument("--offsets-retention-check-interval-ms", type=int, help="KAFKALITE_OFFSETS_RETENTION_CHECK_INTERVAL_MS, default 600000")
    g.add_argument("--group-consumer-session-timeout-ms", type=int, help="KIP-848 session timeout (KAFKALITE_GROUP_CONSUMER_SESSION_TIMEOUT_MS, default 45000)")
    g.add_argument("--group-consumer-heartbeat-interval-ms", type=int, help="KIP-848 heartbeat interval (KAFKALITE_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS, default 5000)")
    g.add_argument("--group-consumer-assignment-interval-ms", type=int, help="at most one KIP-848 target assignment per interval; 0: one per change (KAFKALITE_GROUP_CONSUMER_ASSIGNMENT_INTERVAL_MS, default 1000)")
    g.add_argument("--group-consumer-pending-heartbeat-interval-ms", type=int, help="KIP-848 interval for members mid-hand-over; the plain interval turns it off (KAFKALITE_GROUP_CONSUMER_PENDING_HEARTBEAT_INTERVAL_MS, default 100)")
    g.add_argument("--group-consumer-max-size", type=int, help="KAFKALITE_GROUP_CONSUMER_MAX_SIZE, default unlimited")
    g.add_argument("--group-consumer-migration-policy", choices=["bidirectional", "upgrade", "downgrade", "disabled"], help="KAFKALITE_GROUP_CONSUMER_MIGRATION_POLICY, default bidirectional")
    g.add_argument("--group-coordinator-append-linger-ms", type=int, help="how long coordinator writes wait to share a batch; -1: adaptive, until the requests already read have run (KAFKALITE_GROUP_COORDINATOR_APPEND_LINGER_MS, default -1)")
    if admin:
        from .admin.cli import register as register_admin_commands
        from .security.certs import register as register_certs

        register_admin_commands(sub)  # topics, groups, health (broker/admin)
        register_certs(sub)  # certs (broker/security/certs.py)
        sub.add_parser("cluster", help="control a cluster of `serve --nodes N` (nodes, stop-node, kill-node, start-node, move-leader)", add_help=False)
    else:
        for name in (*ADMIN_COMMANDS, "certs", "cluster"):
            sub.add_parser(name)
    return p


def config_from_args(argv: list[str] | None = None, environ=None) -> BrokerConfig:
    """The serve configuration: flags, then ``--set``, ``KAFKALITE_*``, ``--config``
    (broker/config.py). Raises ConfigError (a ValueError) for a bad setting."""
    args = _parser(admin=False).parse_args(argv)
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config_file", "settings")}
    return load_config(flags, args.settings, args.config_file, environ)


def _skip_optional_imports() -> None:
    """kio imports hypothesis (a test tool) whenever it is installed, which
    costs ~200 ms and ~10 MB; the broker never needs it."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]


def raise_open_files_limit() -> tuple[int, int] | None:
    """Raise the soft limit on open files to the hard one, as Kafka's docs advise a high
    ``ulimit -n``: each partition keeps its active segment file open, and each client
    its socket. Returns (old soft, new soft), or None where it cannot be read."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    target = hard
    if sys.platform == "darwin" and (hard == resource.RLIM_INFINITY or hard > 10240):
        target = 10240  # macOS refuses more than OPEN_MAX for the soft limit
    if soft != resource.RLIM_INFINITY and (target == resource.RLIM_INFINITY or target > soft):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            return soft, soft
        return soft, target
    return soft, soft


def data_dir_problem(data_dir: Path) -> dict | None:
    """Why this process cannot write ``data_dir`` (or create it), as log fields, or None.
    Checked before the listeners open, so that a read-only or foreign-owned directory (a
    bind mount in a container, typically) is reported as such and not as ``cannot listen``."""
    target = Path(data_dir)
    existing = target
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir() or os.access(existing, os.W_OK | os.X_OK):
        return None  # writable, or something else is wrong that the broker reports itself
    uid, gid = os.getuid(), os.getgid()
    return {
        "data_dir": str(target),
        "not_writable": str(existing),
        "uid": uid,
        "gid": gid,
        "fix": f"make {existing} writable by uid {uid}, e.g. `chown -R {uid}:{gid} <directory>` on the host for a bind mount, or use a named volume",
    }


def main(argv: list[str] | None = None) -> int:
    _skip_optional_imports()
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in ADMIN_COMMANDS:
        from .admin.cli import run as run_admin_command

        return run_admin_command(_parser().parse_args(words))
    if words and words[0] == "version":
        _parser(admin=False).parse_args(words)  # `version --help`, or a word too many: argparse answers
        print(f"kafkalite {package_version()}")
        return 0
    if words and words[0] == "cluster":
        from .multinode.control import main as run_cluster_command

        return run_cluster_command(words[1:])
    if words and words[0] == "certs":
        from .security.certs import run as run_certs

        return run_certs(_parser().parse_args(words))
    if not words or words[0] != "serve":
        _parser().parse_args(argv)  # --help, a typo, no command: argparse answers and exits as ever
    try:
        cfg = config_from_args(argv)
    except ValueError as exc:
        print(f"kafkalite: {exc}", file=sys.stderr)
        return 2
    from . import logs
    from .server import run

    logs.configure(cfg.log_format, cfg.log_level)
    problem = data_dir_problem(cfg.data_dir)
    if problem is not None:
        logs.get_logger("cli").error("data directory not writable", **problem)
        return 1
    if cfg.replication_settings:
        logs.get_logger("cli").info("replication settings accepted: a single node keeps one copy of each partition", **cfg.replication_settings)
    limits = raise_open_files_limit()
    if limits is not None:
        logs.get_logger("cli").info("open files limit", soft_was=limits[0], soft=limits[1])
    from .memory import tune_gc

    tune_gc()  # the broker's own process only: a broker embedded in a test keeps its host's collector settings
    if cfg.nodes > 1:
        from .multinode.controller import run_cluster

        return run_cluster(cfg)
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    return runner(run(cfg))
