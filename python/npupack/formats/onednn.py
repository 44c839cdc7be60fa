"""oneDNN format tags in the registry: ``onednn:<tag>`` (docs/openvino.md §8). A finite list is
registered (the tags the OpenVINO formats map to and the common named aliases); any other tag the
grammar reads (``onednn:ABcd8b16a2b``) resolves through :meth:`npupack.Layout.from_onednn`, and a
tag it cannot read raises its LayoutError."""
from __future__ import annotations

from functools import lru_cache

from npupack import grammar, openvino
from npupack.formats.common import layout_format
from npupack.formats.registry import register, register_dynamic

# Weight tags use o/i/g letters (docs/openvino.md §8.1); abc tags say nothing about the tensor.
_WEIGHT_LETTERS = set("goiOIG")


def _make(tag: str):
    lay = grammar.Layout.from_onednn(tag)  # raises the grammar's LayoutError for a bad tag
    letters = "".join(c for c in tag if c.isalpha())
    kind = "weights" if set(letters) & _WEIGHT_LETTERS else "feature"
    return layout_format(f"onednn:{tag}", "onednn", kind, lay, "docs/openvino.md §8.1",
                         ({"shape": (3, 5, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2)[: lay.rank], "params": {}},))


@lru_cache(maxsize=256)
def _dynamic(tag: str):
    return _make(tag)


def _listed() -> list:
    tags = list(grammar._ONEDNN_ALIASES)
    for info in openvino.formats():
        if info.supported and info.onednn:
            tags.append(info.onednn)
    return list(dict.fromkeys(tags))


for _tag in _listed():
    register(_make(_tag))
register_dynamic("onednn", _dynamic)
