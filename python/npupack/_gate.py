"""The one argument gate of the public entries: what is checked about the caller's arrays before
any work (docs/design.md §2.7).

* dtype kind: the kernels move bytes, so an array of Python objects would be copied as raw
  pointers (reference counts go wrong; unpacked, arbitrary bytes become pointers) and strings,
  records and datetimes are not numbers a layout holds. Only booleans, integers, floats and
  complex numbers pass (:func:`numeric_dtype`).
* ``out=`` aliasing: a packer reads its inputs while it writes ``out``, in an order of its own,
  and it may first convert an input (byte order, fp16, densified groups, a Winograd transform),
  after which the copy no longer shows the overlap. So every array the call reads is compared
  with ``out`` here, on the caller's own arrays, before anything is converted or written
  (:func:`check_disjoint`). Arrays side by side in one allocation are fine; any overlap of the
  memory spans (strides, negative ones included) is a LayoutError.

Inputs mutated by another thread during a call give undefined values in the result, never a
crash: the C++ kernels bound every read and write by the sizes of the buffers they were given.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from npupack._core import LayoutError

__all__ = ["NUMERIC_KINDS", "numeric_dtype", "check_disjoint", "gate"]

NUMERIC_KINDS = "biufc"  # bool, signed, unsigned, float, complex

# NumPy's bounds test without the __array_function__ dispatch, which only serves other array
# types: the inline gate calls it on two exact ndarrays, where the dispatch does nothing.
_MAY_SHARE = getattr(np.may_share_memory, "_implementation", np.may_share_memory)


def numeric_dtype(dtype: np.dtype, name: str) -> np.dtype:
    """``dtype`` when it is a plain number (bool, integer, float, complex); TypeError naming
    ``name`` for object, string, bytes, void / structured and datetime / timedelta dtypes."""
    if dtype.kind not in NUMERIC_KINDS:
        raise TypeError(f"{name}: dtype {dtype} is not a number; object, string, structured and datetime elements "
                        "cannot be packed: pass a real (bool, integer, float) or complex dtype")
    return dtype


def _arrays(value):
    """The ndarrays (or buffer-backed views) inside an argument: an array, a writable bytes-like
    object, or a list / tuple of them. Everything else reads no caller memory that ``out`` could
    hold."""
    if isinstance(value, np.ndarray):
        return (value,)
    if isinstance(value, (bytearray, memoryview)):
        return (np.frombuffer(value, np.uint8),) if memoryview(value).c_contiguous else ()
    if isinstance(value, (list, tuple)):
        return tuple(a for v in value if isinstance(v, (np.ndarray, bytearray, memoryview)) for a in _arrays(v))
    return ()


def check_disjoint(out, reads: dict) -> None:
    """LayoutError, naming both, when an ndarray of ``out`` (an array or a list of them) spans
    memory that an array of ``reads`` (name -> argument) spans. The test is NumPy's bounds test
    (``np.may_share_memory``): spans that overlap are refused even where the strides would keep
    the elements apart, since the packers need separate buffers anyway."""
    outs = _arrays(out)
    if not outs:
        return
    for name, value in reads.items():
        for a in _arrays(value):
            for o in outs:
                if np.may_share_memory(a, o):
                    _overlap(name)


def _overlap(name: str):
    raise LayoutError(f"out: overlaps the memory {name} spans; the packers read {name} while they write out, so "
                      "they need separate buffers")


def gate(*reads: str, labels: dict | None = None, words=None):
    """Decorator of a public entry: before the call, each ndarray argument named in ``reads``
    must have a numeric dtype (:func:`numeric_dtype`) and must not overlap the ``out``
    argument (:func:`check_disjoint`). ``labels`` renames an argument in the overlap message
    (pack_weights has reported its tensor as ``x`` since the engine made that check). ``words``
    (keys, rename) maps the registry's words to the entry's own parameters first, where a call
    uses one of ``keys`` (npupack.formats.aliases, docs/formats.md §3.1): in the gate, so that the
    common call pays no second wrapper. Costs a few attribute reads per call when ``out`` is not
    given."""
    labels = labels or {}
    word_keys, rename = words if words is not None else (frozenset(), None)

    def wrap(f):
        params = inspect.signature(f).parameters
        names = list(params)
        where = tuple((name, names.index(name), labels.get(name, name)) for name in reads)
        takes_out = "out" in params
        if takes_out and params["out"].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"gate: {f.__qualname__} must take out= as a keyword-only argument")

        ndarray, may_share = np.ndarray, _MAY_SHARE  # closure cells: no global lookups per call

        def check(args, kwargs):
            out = kwargs.get("out") if takes_out else None
            out_array = type(out) is ndarray
            n = len(args)
            for name, i, label in where:
                v = args[i] if i < n else kwargs.get(name)
                if type(v) is ndarray:
                    if v.dtype.kind not in NUMERIC_KINDS:
                        numeric_dtype(v.dtype, name)
                    if out_array and may_share(v, out):
                        _overlap(label)
                elif out is not None and v is not None:
                    check_disjoint(out, {label: v})
            if out is not None and not out_array:
                check_disjoint(out, {label: args[i] if i < n else kwargs.get(name) for name, i, label in where})

        first, at, label, several = *where[0], len(where) > 1

        # The common call (one array read, no out= or an ndarray out=) is checked inline: the
        # packers' small calls take a few microseconds.
        @functools.wraps(f)
        def call(*args, **kwargs):
            if rename is not None and not word_keys.isdisjoint(kwargs):
                kwargs = rename(kwargs)
            out = kwargs.get("out")
            if several:
                check(args, kwargs)
            else:
                v = args[at] if len(args) > at else kwargs.get(first)
                if type(v) is ndarray:
                    if v.dtype.kind not in NUMERIC_KINDS:
                        numeric_dtype(v.dtype, first)
                    if out is not None and takes_out:
                        if type(out) is ndarray:
                            if may_share(v, out):
                                _overlap(label)
                        elif type(out) is tuple:  # one buffer per plane (pixel planes)
                            for o in out:
                                if type(o) is not ndarray:
                                    check(args, kwargs)
                                    break
                                if may_share(v, o):
                                    _overlap(label)
                        else:
                            check(args, kwargs)
                elif out is not None:
                    check(args, kwargs)
            return f(*args, **kwargs)

        call.gated_reads = reads
        call.gate_args = (reads, labels)
        return call

    return wrap
