"""Where the peer suites' builds live: ``$KAFKALITE_PEERS_CACHE`` or ``~/.cache/kafkalite/peers``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("KAFKALITE_PEERS_CACHE") or Path.home() / ".cache" / "kafkalite" / "peers")


def staging_dir(prefix: str) -> Path:
    """A fresh directory beside the final one, renamed into place when complete."""
    CACHE.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{prefix}-", dir=CACHE))


def publish(staging: Path, final: Path) -> None:
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
