"""``npupack convert``: a logical tensor file into a registered format's bytes, or back
(docs/formats.md §5). Benchmark suites keep their inputs and outputs as ``.npy`` or raw files;
this packs them for a board and reads the board's buffers back, through the same registry entry
as the Python API."""
from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np

from npupack.errors import LayoutError
from npupack.files import write_atomic
from npupack.formats.registry import get
from npupack.layout import check_dims, check_dtype

__all__ = ["convert", "parse_param"]


def parse_param(text: str) -> tuple:
    """``KEY=VALUE`` of the command line as (key, value): ``1,2,3`` a tuple of ints, ``7`` an
    int, ``true`` / ``false`` / ``none`` a bool or None, anything else the text. Raises
    ValueError naming the text when it has no ``=``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--param: expected KEY=VALUE, got {text!r}")
    low = value.strip().lower()
    if low in ("true", "false"):
        return key.strip(), low == "true"
    if low == "none":
        return key.strip(), None
    parts = [p.strip() for p in value.split(",")]
    try:
        ints = [int(p) for p in parts]
    except ValueError:
        return key.strip(), value
    return key.strip(), tuple(ints) if len(parts) > 1 or value.strip().endswith(",") else ints[0]


def _read(path: Path, shape, dtype, what: str) -> np.ndarray:
    """A ``.npy`` file (memory-mapped, read only) or raw bytes (``shape`` and ``dtype`` needed
    only to say how to read a raw tensor; None for packed bytes)."""
    if path.suffix.lower() == ".npy":
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError as e:
            raise LayoutError(f"{what}: {path} is not a readable .npy file ({e})") from None
    raw = np.fromfile(path, dtype=np.uint8)
    if shape is None:
        return raw
    need = int(np.prod(shape)) * dtype.itemsize
    if raw.size != need:
        raise LayoutError(f"{what}: {path} holds {raw.size} bytes; a {dtype} tensor of shape {shape} is {need}")
    return raw.view(dtype.newbyteorder("<")).reshape(shape)


def _write(path: Path, arr: np.ndarray) -> int:
    """``arr`` as ``.npy`` (by the suffix) or raw little-endian bytes, written atomically;
    returns the bytes written."""
    if path.suffix.lower() == ".npy":
        f = io.BytesIO()
        np.save(f, arr, allow_pickle=False)
        data = f.getbuffer()
    else:
        data = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False)).view(np.uint8).reshape(-1)
    write_atomic(path, data)
    return len(data)


def convert(source, output, *, to=None, from_=None, shape=None, dtype=None, params=None) -> dict:
    """Pack the tensor in ``source`` into format ``to``, or unpack the bytes in ``source`` from
    format ``from_`` (exactly one of the two), and write ``output`` (docs/formats.md §5).

    Parameters
    ----------
    source, output : path
        ``.npy`` or raw (any other suffix). A raw tensor needs ``shape`` and ``dtype``; packed
        bytes as ``.npy`` are a uint8 array. ``output`` is written atomically (readers see the
        old file or the whole new one), ``.npy`` or raw by its suffix; it must not be ``source``.
    to, from_ : str
        A registered format name (``"kneron:1W16C8B"``; :func:`npupack.formats.names`).
    shape : sequence of int
        Logical shape, the format's order, elements: required with ``from_`` and for a raw
        ``source`` with ``to``; must match a ``.npy`` source.
    dtype : numpy dtype
        Element type: required with ``from_`` and for a raw ``source``; must match a ``.npy``
        source (no value is converted silently).
    params : dict
        The format's parameters (``target``, ``precision``, strides in bytes, ...).

    Returns
    -------
    dict
        ``format``, ``direction`` ("pack" / "unpack"), ``input``, ``output``, ``shape``,
        ``dtype``, ``params``, ``bytes_in``, ``bytes_out``, ``seconds``.

    Raises
    ------
    ValueError
        Neither or both of ``to`` / ``from_``; ``output`` is ``source``; a missing shape or dtype.
    LayoutError
        An unknown format (with the closest names); a file of the wrong size or dtype; as the
        format's ``pack`` / ``unpack``.
    TypeError, UnsupportedError
        As the format's verbs.
    OSError
        An unreadable source or unwritable output.
    """
    if (to is None) == (from_ is None):
        raise ValueError("--to / --from: give exactly one (pack a tensor into a format, or unpack a format's bytes)")
    source, output = Path(source), Path(output)
    if source.resolve() == output.resolve():
        raise ValueError(f"-o: {output} is the input file; write somewhere else")
    params = dict(params or {})
    f = get(to if to is not None else from_)
    shape = None if shape is None else check_dims(shape, "shape")
    dtype = None if dtype is None else check_dtype(dtype, "dtype")
    start = time.perf_counter()
    if to is not None:
        if source.suffix.lower() != ".npy" and (shape is None or dtype is None):
            raise ValueError(f"--shape / --dtype: a raw input ({source.name}) needs both")
        x = _read(source, shape, dtype, "input")
        if shape is not None and tuple(x.shape) != shape:
            raise LayoutError(f"--shape: {shape} does not match the input's shape {tuple(x.shape)}")
        if dtype is not None and x.dtype != dtype:
            raise TypeError(f"--dtype: {dtype} does not match the input's dtype {x.dtype}; convert it first")
        result = f.pack(np.asarray(x), **params)
        nbytes_in = int(x.nbytes)
    else:
        if shape is None or dtype is None:
            raise ValueError("--shape / --dtype: unpacking needs the logical shape and dtype")
        buf = _read(source, None, None, "input")
        if buf.dtype != np.uint8:
            raise TypeError(f"input: packed bytes in a .npy file are uint8, got {buf.dtype}")
        buf = np.ascontiguousarray(buf).reshape(-1)
        need = f.nbytes(shape, dtype, **params)
        if buf.size != need:
            raise LayoutError(f"input: {source} holds {buf.size} bytes; {f.name} of shape {shape} and {dtype} is "
                              f"{need} bytes")
        result = f.unpack(buf, shape, dtype, **params)
        nbytes_in = int(buf.size)
    written = _write(output, result)
    return {"format": f.name, "direction": "pack" if to is not None else "unpack", "input": str(source),
            "output": str(output), "shape": list(shape if shape is not None else x.shape),
            "dtype": str(dtype if dtype is not None else x.dtype),
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
            "bytes_in": nbytes_in, "bytes_out": written, "seconds": round(time.perf_counter() - start, 6)}
