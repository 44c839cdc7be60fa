"""File helpers shared by the command-line jobs: atomic writes and checksums."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

__all__ = ["write_atomic", "sha256_file"]


def write_atomic(path: Path, data) -> None:
    """Write ``data`` (bytes or a uint8 array) to ``path`` via a temporary file in the same
    directory and ``os.replace``: readers see the old file or the whole new one, never a part."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data if isinstance(data, (bytes, bytearray)) else memoryview(np.ascontiguousarray(data)))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def sha256_file(path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
