"""structlog set-up: everything goes to stderr, as JSON or for a console."""

from __future__ import annotations

import logging
import sys

import structlog


_level = logging.INFO


def enabled(level: int) -> bool:
    """Whether a log call at ``level`` would print: spares building a logger for nothing."""
    return level >= _level


def configure(fmt: str = "console", level: str = "info", *, embedded: bool = False) -> None:
    """Log to stderr at ``level``. ``embedded`` (a broker inside tests): loggers are not cached, so
    settings made later apply everywhere, and neither the stdlib bridge nor :func:`enabled` is set."""
    global _level
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    if not embedded:
        _level = numeric
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=not embedded,
    )
    if not embedded:
        _bridge_stdlib(numeric)


# the attributes every stdlib LogRecord has: the others are the fields its ``extra`` carried
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


class _StdlibBridge(logging.Handler):
    """Hands the stdlib ``logging`` records (storage/ logs through ``logging``: it may not import
    broker/) to structlog, so they have a level, a time stamp and the JSON format like the rest:
    the message is the event, the record's ``extra`` fields are its fields."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRS}
            if record.exc_info:
                fields["exc_info"] = record.exc_info
            structlog.get_logger(record.name).log(record.levelno, record.getMessage(), logger=record.name, **fields)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def _bridge_stdlib(level: int) -> None:
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, _StdlibBridge)]:
        root.removeHandler(h)
    root.addHandler(_StdlibBridge())
    root.setLevel(level)


def get_logger(name: str | None = None, **ctx):
    log = structlog.get_logger(name)
    return log.bind(**ctx) if ctx else log
