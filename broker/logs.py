"""structlog set-up: everything goes to stderr, as JSON or for a console."""

from __future__ import annotations

import logging
import sys

import structlog


_level = logging.INFO


def enabled(level: int) -> bool:
    """Whether a log call at ``level`` would print: spares building a logger for nothing."""
    return level >= _level


def configure(fmt: str = "console", level: str = "info") -> None:
    global _level
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
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
        cache_logger_on_first_use=True,
    )


def get_logger(name: str | None = None, **ctx):
    log = structlog.get_logger(name)
    return log.bind(**ctx) if ctx else log
