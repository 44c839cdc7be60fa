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


def _out_other(out, v, label: str) -> None:
    """The overlap test of one read array ``v`` against an ``out`` that is not one ndarray: a
    tuple of ndarrays (one buffer per plane) inline, anything else by :func:`check_disjoint`."""
    if type(out) is tuple:
        for o in out:
            if type(o) is not np.ndarray:
                break
            if _MAY_SHARE(v, o):
                _overlap(label)
        else:
            return
    check_disjoint(out, {label: v})


class _Unset:
    """The default of a parameter a registry word may stand for: tells "not given" from any value."""

    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


def gate(*reads: str, labels: dict | None = None, words: dict | None = None):
    """Decorator of a public entry: before the call, each ndarray argument named in ``reads``
    must have a numeric dtype (:func:`numeric_dtype`) and must not overlap the ``out``
    argument (:func:`check_disjoint`). ``labels`` renames an argument in the overlap message
    (pack_weights has reported its tensor as ``x`` since the engine made that check). ``words``
    ({registry word: own parameter or (own parameter, conversion)}, npupack.formats.aliases,
    docs/formats.md §3.1) adds each word as a keyword the entry takes for its own parameter.

    The wrapper is generated with the entry's own parameter list and passes them on by name: a
    ``*args, **kwargs`` wrapper would build and unpack a dict on every call, and the packers'
    small calls take a few microseconds. The entry may have positional-or-keyword and
    keyword-only parameters only; ``out`` must be keyword-only."""
    labels = labels or {}
    words = words or {}

    def wrap(f):
        params = inspect.signature(f).parameters
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        if any(p.kind not in kinds for p in params.values()):
            raise TypeError(f"gate: {f.__qualname__} may take named parameters only (no *args, **kwargs or /)")
        takes_out = "out" in params
        if takes_out and params["out"].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"gate: {f.__qualname__} must take out= as a keyword-only argument")
        # The generated code names its helpers with a leading underscore and takes each word as a
        # keyword of its own: names that would collide, and reads or owns it cannot serve, are
        # refused here rather than misbehaving on a call.
        owns = {(own[0] if isinstance(own, tuple) else own) for own in words.values()}
        bad = [n for n in list(params) + list(words) if n.startswith("_")] + [w for w in words if w in params]
        bad += [n for n in reads if n not in params]
        bad += [o for o in owns if o not in params or params[o].kind is not inspect.Parameter.KEYWORD_ONLY]
        if bad:
            raise TypeError(f"gate: {f.__qualname__} cannot be wrapped for {sorted(set(bad))}: parameters and words "
                            "without a leading underscore, words that are not parameters, reads that are, and "
                            "keyword-only parameters for the words")
        ns = {"_f": f, "_ndarray": np.ndarray, "_share": _MAY_SHARE, "_kinds": NUMERIC_KINDS,
              "_numeric": numeric_dtype, "_overlap": _overlap, "_other": _out_other, "_disjoint": check_disjoint,
              "_UNSET": _UNSET}
        head, body, passed, star = [], [], [], False
        for i, p in enumerate(params.values()):
            if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
                head.append("*")
                star = True
            if p.name in owns:
                default = "=_UNSET"
                ns[f"_d{i}"] = p.default
            elif p.default is not p.empty:
                default = f"=_d{i}"
                ns[f"_d{i}"] = p.default
            else:
                default = ""
            head.append(p.name + default)
            passed.append(p.name if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else f"{p.name}={p.name}")
        if words and not star:
            head.append("*")
        for j, (word, own) in enumerate(words.items()):
            own, convert = own if isinstance(own, tuple) else (own, None)
            ns[f"_w{j}"] = (word, own, convert)
            head.append(f"{word}=_UNSET")
            i = list(params).index(own)
            missing = (f"raise TypeError(\"{f.__name__}() missing 1 required keyword-only argument: '{own}'\")"
                       if params[own].default is inspect.Parameter.empty else f"{own} = _d{i}")
            body += [f"if {word} is not _UNSET:", f"    {own} = _resolve(_w{j}, {word}, {own})",
                     f"elif {own} is _UNSET:", f"    {missing}"]
            ns["_resolve"] = _resolve_word
        for name in reads:
            label = labels.get(name, name)
            body += [f"if type({name}) is _ndarray:",
                     f"    if {name}.dtype.kind not in _kinds:", f"        _numeric({name}.dtype, {name!r})"]
            if takes_out:
                body += ["    if out is not None:", "        if type(out) is _ndarray:",
                         f"            if _share({name}, out):", f"                _overlap({label!r})",
                         "        else:", f"            _other(out, {name}, {label!r})",
                         f"elif out is not None and {name} is not None:", f"    _disjoint(out, {{{label!r}: {name}}})"]
        body.append(f"return _f({', '.join(passed)})")
        src = f"def _gated({', '.join(head)}):\n" + "".join(f"    {line}\n" for line in body)
        exec(compile(src, f"<gate of {f.__qualname__}>", "exec"), ns)
        call = functools.wraps(f)(ns["_gated"])
        call.gated_reads = reads
        call.gate_args = (reads, labels)
        return call

    return wrap


def _resolve_word(word_own_convert, value, given):
    """The own parameter's value from a registry word's ``value``: converted, and a TypeError
    naming both where the own parameter was given too with another value (docs/formats.md §3.1)."""
    word, own, convert = word_own_convert
    if convert is not None:
        value = convert(value)
    if given is not _UNSET and given != value:
        raise TypeError(f"{word} / {own}: give one of them ({own} is the older spelling of {word}, "
                        "kept for one release; docs/formats.md §3.1)")
    return value
