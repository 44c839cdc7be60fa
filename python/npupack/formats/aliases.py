"""The registry's words on the vendor fronts (docs/formats.md §3.1): one table of which front
takes which registry word for which of its own parameters, and one decorator that reads it.
The older spellings stay the fronts' own parameters, accepted for one release, without a
warning."""
from __future__ import annotations

import functools

from npupack._gate import _UNSET, _resolve_word, gate

__all__ = ["ALIASES", "registry_words"]



def _nvdla_config(value):
    """``target=`` of the NVDLA fronts: a preset name (``"nv_small"``) or a Config, as ``config=``."""
    from npupack.nvdla.config import Config

    if isinstance(value, Config):
        return value
    if not isinstance(value, str):
        raise TypeError(f"target: expected an NVDLA configuration name or an npupack.nvdla.Config, got "
                        f"{type(value).__name__}")
    try:
        return Config.named(value)
    except ValueError as e:
        raise ValueError(f"target: {str(e).removeprefix('name: ')}") from None


_NVDLA = {"target": ("config", _nvdla_config)}

# front (module.function) -> {registry word: the front's own (older) parameter, or (that parameter,
# the conversion of the word's value to it)}
ALIASES = {
    "kneron.pack": {"target": "chip"},
    "kneron.unpack": {"target": "chip"},
    "kneron.nbytes": {"target": "chip"},
    "horizon.aligned_shape": {"target": "rule"},
    "horizon.pack_nv12": {"target": "rule"},
    "horizon.unpack_nv12": {"target": "rule"},
    **{f"nvdla.{f}": _NVDLA for f in ("pack_weights", "pack_weights_many", "weights_nbytes", "pack_feature",
                                       "unpack_feature", "feature_strides", "feature_layout", "prune")},
}


def registry_words(front: str):
    """Decorator: ``front`` (a key of :data:`ALIASES`) also takes the registry's words. A word
    given together with its older spelling is a TypeError naming both, unless they agree. On an
    entry wrapped by the argument gate (npupack._gate.gate) the words join the gate's own
    generated wrapper, so the packers' small calls pay for one wrapper, not two."""
    table = ALIASES[front]
    keys = frozenset(table)
    words = {word: own if isinstance(own, tuple) else (own, None) for word, own in table.items()}

    def rename(kwargs: dict) -> dict:
        kwargs = dict(kwargs)
        for word, (own, convert) in words.items():
            if word in kwargs:
                kwargs[own] = _resolve_word((word, own, convert), kwargs.pop(word), kwargs.get(own, _UNSET))
        return kwargs

    def wrap(func):
        gated = getattr(func, "gate_args", None)
        if gated is not None:
            reads, labels = gated
            return gate(*reads, labels=labels, words=table)(func.__wrapped__)

        @functools.wraps(func)
        def call(*args, **kwargs):
            if keys.isdisjoint(kwargs):  # the older spelling: straight through
                return func(*args, **kwargs)
            return func(*args, **rename(kwargs))

        return call

    return wrap
