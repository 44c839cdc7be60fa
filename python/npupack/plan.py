"""The plan the C++ fast path runs for a layout, as text (docs/design.md §3.12).

The engine turns a descriptor into a loop nest, simplifies it, and takes a strategy from an ordered
list that ends in the per-element reference. :func:`describe` prints that plan without packing
anything: what ``npupack explain FORMAT --shape ... --plan`` shows.
"""
from __future__ import annotations

import numpy as np

from npupack import _core
from npupack.errors import LayoutError
from npupack.grammar import Layout, _as_layout, _check_dtype
from npupack.layout import BlockedLayout, check_dims, pad_bytes

__all__ = ["describe", "strategy", "strategies"]

_DIRECTIONS = ("pack", "unpack")


def _resolve(layout, shape, dtype, direction, pad_value):
    """The bound descriptor, the direction as to_packed, and the pad bytes, all checked."""
    if not isinstance(direction, str) or direction not in _DIRECTIONS:
        raise ValueError(f"direction: expected 'pack' or 'unpack', got {direction!r}")
    dtype = _check_dtype(dtype, "dtype")
    if isinstance(layout, BlockedLayout):
        shape = check_dims(shape, "shape")
        if shape != layout.shape:
            raise LayoutError(f"shape: {shape} is not the BlockedLayout's shape {layout.shape}")
        if dtype.itemsize != layout.dtype.itemsize:
            raise LayoutError(f"dtype: {dtype} has {dtype.itemsize}-byte elements, the BlockedLayout "
                              f"{layout.dtype.itemsize}-byte ones")
        bound = layout
    elif isinstance(layout, (Layout, str)):
        bound = _as_layout(layout).bind(shape, dtype)
    else:
        raise TypeError(f"layout: expected a npupack.Layout, its text or a npupack.BlockedLayout, "
                        f"got {type(layout).__name__}")
    if pad_value is not None and direction == "unpack":
        raise ValueError("pad_value: applies to direction='pack' only (unpacking never writes holes)")
    pad = b"" if pad_value is None else pad_bytes(pad_value, np.dtype(dtype))
    return bound, direction == "pack", pad


def describe(layout, shape, dtype, *, direction: str = "pack", pad_value=None) -> str:
    """The plan that packing (or unpacking) a C-contiguous tensor of ``shape`` and ``dtype`` in
    ``layout`` runs, as multi-line text (docs/design.md §3.12).

    The text lists the loops left after the planning passes, outer to inner (each with its
    extent in elements and its logical and packed steps in bytes), the strategy taken from the
    ordered list and its place in it, why it was taken where that is a decision on measured sizes
    (output bytes against the streaming and tiling thresholds), and the options: how holes are
    written, streaming stores, prefetch of the next outer slab, tile size, threads, and how the
    fp16 INF/NaN check of ``pack_checked`` runs. Only the descriptor is built: the tensor is never
    allocated, read or written, so a shape of terabytes is described as fast as a small one.

    A ragged layout whose short last block is peeled off (docs/design.md §3.13) is described as
    the whole layout, and a last line starting ``peeled`` says so: the full blocks and the short
    block then run as two layouts, with the strategies that line names and options (streaming,
    threads) decided on each one's own size.

    Parameters
    ----------
    layout : Layout, str or BlockedLayout
        A :class:`npupack.Layout`, its text (``"NCHW16c"``), or a bound
        :class:`npupack.BlockedLayout` (for ragged or strided layouts such as NVDLA feature
        data, which the text grammar cannot express).
    shape : sequence of int
        Logical shape in the layout's logical order, elements (N,C,H,W for ``NCHW16c``). For a
        BlockedLayout, its own shape.
    dtype : numpy dtype
        Element type, any numeric dtype of 1, 2, 4 or 8 bytes (int8, uint8, float16, float32,
        ...); the plan depends only on its size.
    direction : {'pack', 'unpack'}
        Which way the data moves.
    pad_value : scalar, optional
        Value of the holes when packing, in ``dtype`` (None: zero). It decides whether the plan
        may zero row gaps itself or scatter whole blocks.

    Returns
    -------
    str
        The plan, one item per line, ending in a newline; its second line names the strategy
        (``strategy: <name> (entry i of n: ...)``).

    Raises
    ------
    TypeError
        ``layout`` of another type; a ``dtype`` that is not a number of 1, 2, 4 or 8 bytes; a
        ``shape`` that is not a sequence of integers; a ``pad_value`` that is not a number.
    ValueError
        ``direction`` not 'pack' or 'unpack'; a ``pad_value`` with direction 'unpack' or one
        ``dtype`` cannot hold.
    LayoutError
        Bad layout text; a rank mismatch or dims < 1; for a BlockedLayout, a ``shape`` or element
        size other than its own; size arithmetic overflowing 64 bits.
    """
    bound, to_packed, pad = _resolve(layout, shape, dtype, direction, pad_value)
    return _core.plan_describe(bound._core, to_packed, pad)


def strategy(layout, shape, dtype, *, direction: str = "pack", pad_value=None) -> str:
    """The name of the strategy in :func:`describe`'s plan (one of :func:`strategies`); for a
    peeled layout, the whole layout's (its parts' are on describe's ``peeled`` line). Arguments
    and errors as for :func:`describe` (docs/design.md §3.12, 3.13)."""
    bound, to_packed, pad = _resolve(layout, shape, dtype, direction, pad_value)
    return _core.plan_strategy(bound._core, to_packed, pad)


def strategies() -> tuple[str, ...]:
    """The names of the engine's ordered strategy list, in the order they are tried; the last,
    ``reference``, applies to every plan (docs/design.md §3.12)."""
    return tuple(_core.plan_strategies())
