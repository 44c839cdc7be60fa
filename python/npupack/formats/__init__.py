"""One registry of every format npupack packs, with one vocabulary (docs/formats.md).

``npupack.formats.get("openvino:b_fs_yx_fsv16")`` gives a :class:`Format` whose verbs
``nbytes``, ``pack``, ``unpack``, ``offset_of`` (bytes), ``explain`` and ``layout`` take the same
words for every vendor: ``target`` (NVDLA configuration, Kneron chip, Horizon alignment rule),
``precision``, ``out``, ``pad_value``, strides in bytes. :func:`names` lists the registered names.
"""
from npupack.formats.registry import KINDS, VENDORS, VERBS, Format, closest, get, names

__all__ = ["Format", "get", "names", "closest", "VENDORS", "KINDS", "VERBS"]
