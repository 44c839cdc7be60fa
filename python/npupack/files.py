"""File helpers shared by the command-line jobs: atomic writes, checksums, reading only regular
files inside a folder, and output folders that are swapped in whole (docs/design.md §6.4)."""
from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import stat
from pathlib import Path

import numpy as np

__all__ = ["write_atomic", "sha256_file", "open_inside", "read_inside", "check_output_dir", "staging_dir",
           "swap_in", "remove_stale_staging", "is_npupack_manifest"]


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


def open_inside(folder, name: str, what: str) -> int:
    """Open ``folder/name`` read-only and return the file descriptor, only if it is a regular file
    inside ``folder``: no ``..`` or absolute path, no symbolic link anywhere below ``folder``, one
    hard link (a second name may be outside), not a FIFO or device (opened non-blocking, so a FIFO
    never blocks). Raises ValueError naming ``what`` otherwise, FileNotFoundError when missing."""
    if not isinstance(name, str) or not name or "\x00" in name or os.path.isabs(name):
        raise ValueError(f"{what}: {name!r} is not a relative file name inside {folder}")
    parts = Path(name).parts
    if any(p in ("..", ".") for p in parts):
        raise ValueError(f"{what}: {name!r} leaves {folder} (no '..' or '.' components)")
    base = Path(folder)
    for i in range(1, len(parts)):  # every intermediate folder must be a real folder, not a link out
        sub = base.joinpath(*parts[:i])
        if sub.is_symlink():
            raise ValueError(f"{what}: {name!r} goes through the symbolic link {sub}")
    path = base.joinpath(*parts)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError(f"{what}: {path} is a symbolic link; only regular files inside {folder} are read") \
                from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{what}: {path} is not a regular file (a FIFO, device or folder is never read)")
        if st.st_nlink != 1:
            raise ValueError(f"{what}: {path} has {st.st_nlink} hard links; a file with another name may lie "
                             f"outside {folder}, so it is not read")
        real = os.path.realpath(path)
        root = os.path.realpath(base)
        if os.path.commonpath([real, root]) != root:
            raise ValueError(f"{what}: {path} resolves outside {folder}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_inside(folder, name: str, what: str, offset: int = 0, size=None) -> bytearray:
    """The ``size`` bytes (all to the end when None) at ``offset`` of ``folder/name``, opened by
    :func:`open_inside`. Raises ValueError when the file is shorter than asked."""
    fd = open_inside(folder, name, what)
    with open(fd, "rb", buffering=0, closefd=True) as f:
        have = os.fstat(fd).st_size
        n = have - offset if size is None else size
        if offset < 0 or n < 0 or offset + n > have:
            raise ValueError(f"{what}: {name} holds {max(have - offset, 0)} of the {n} bytes at offset {offset}")
        buf = bytearray(n)
        view, done = memoryview(buf), 0
        f.seek(offset)
        while done < n:
            got = f.readinto(view[done:])
            if not got:
                raise ValueError(f"{what}: {name} ended while reading (changed meanwhile?)")
            done += got
        return buf


def is_npupack_manifest(folder) -> bool:
    """True when ``folder/manifest.json`` is a regular file holding a manifest npupack wrote."""
    try:
        m = json.loads(read_inside(folder, "manifest.json", "manifest"))
    except (OSError, ValueError):
        return False
    # NVDLA manifests, and those of another vendor's weight format (they name it in weight_format).
    return isinstance(m, dict) and isinstance(m.get("npupack_version"), str) and \
        (m.get("format") == "nvdla" or isinstance(m.get("weight_format"), str))


def check_output_dir(out, force: bool = False) -> None:
    """An output folder npupack may replace: missing, empty, or holding an npupack manifest
    (``force`` replaces any folder). Raises ValueError for a file or a folder of something else."""
    out = Path(out)
    if out.is_symlink():
        raise ValueError(f"out_dir: {out} is a symbolic link; give the folder it points to")
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a directory")
    if out.is_dir() and not force and any(out.iterdir()) and not is_npupack_manifest(out):
        raise ValueError(f"out_dir: {out} is not empty and holds no npupack manifest; npupack replaces only "
                         "its own output folders (force=True / --force to replace it anyway)")


def _owner() -> str:
    """``<host hash>-<pid>``: who writes a staging folder, in its name, so that a later run can
    tell a folder of a process that died from one still being written (also on a shared disk)."""
    return f"{hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]}-{os.getpid()}"


_STAGING = re.compile(r"^\..+\.npupack-([0-9a-f]{6})-(\d+)-[0-9a-f]{8}\.(tmp|old)$")


def _aside(out: Path, suffix: str) -> Path:
    return out.with_name(f".{out.name}.npupack-{_owner()}-{secrets.token_hex(4)}.{suffix}")


def staging_dir(out) -> Path:
    """A new folder beside ``out`` to write the output in; its name holds its owner (host and
    process), so that a later run removes it if this process dies, wherever it stopped."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out.parent)
    tmp = _aside(out, "tmp")
    tmp.mkdir()
    return tmp


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux renameat2 RENAME_EXCHANGE); False where unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP if hasattr(errno, "ENOTSUP") else -1):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


def swap_in(tmp: Path, out: Path) -> None:
    """Put the finished folder ``tmp`` in place of ``out`` in one step, so that a reader or a kill
    sees the old folder or the new one, never a mix; the old one (now at ``tmp``'s name, which a
    later run recognises) is then removed."""
    if out.is_dir() and _exchange(tmp, out):
        shutil.rmtree(tmp, ignore_errors=True)
        return
    if out.is_dir():  # no atomic exchange here: two renames, the old folder aside in between
        old = _aside(out, "old")
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)


def remove_stale_staging(parent) -> None:
    """Remove the staging folders in ``parent`` of npupack runs on this host whose process is gone."""
    host = _owner().split("-")[0]
    try:
        entries = list(Path(parent).iterdir())
    except OSError:
        return
    for entry in entries:
        m = _STAGING.match(entry.name)
        if m and m.group(1) == host and not _alive(int(m.group(2))) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # this process: another thread of it may be writing that folder
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:  # a killed process nobody has reaped yet (a zombie) still answers signal 0
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
