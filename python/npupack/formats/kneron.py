"""Kneron layouts in the registry: ``kneron:<layout>`` (``kneron:1W16C8B``) for every layout of
``kp_model_tensor_data_layout_t``, with ``target`` = the chip (docs/kneron.md §3, 4). On KL520,
KL630 and KL720 the shape is (C, H, W) or (1, C, H, W) (docs/kneron.md §6); on KL730 and KL830
it is the ONNX shape, placed by the NEF's ``stride_npu`` (docs/kneron.md §7)."""
from __future__ import annotations

import numpy as np

from npupack import kneron as kn
from npupack.errors import UnsupportedError
from npupack.formats.registry import Format, register

PARAMS = {"target": "the chip: kl520, kl630, kl720 (closed formulas), kl730, kl830 (stride_npu)",
          "stride_npu": "KL730/KL830: the NEF's stride per ONNX axis, scalars (docs/kneron.md §7.1)",
          "stride_onnx": "optional; must be the row-major strides of the shape, scalars (docs/kneron.md §7.1)",
          "clear_lsb": "clear bit 0 of 16-bit scalars (default: KL730/KL830 8W1C16B and RAW_16B; "
                       "docs/kneron.md §11)",
          "allow_input_only": "unpack only: read back an input-only layout (4W4C8B, HW*) packed oneself "
                              "(docs/kneron.md §4)"}
_V1_DOC = "docs/kneron.md §6.4"
_V2_DOC = "docs/kneron.md §7.3"


def _targets(lay) -> tuple:
    v1 = tuple(c for c in kn.V1_CHIPS if lay in kn._V1[c])
    return v1 + kn.V2_CHIPS


def _need(target):
    if target is None:
        raise ValueError("target: a Kneron layout needs the chip (kl520, kl630, kl720, kl730, kl830; "
                         "docs/kneron.md §4)")
    return target


def _entry(lay) -> Format:
    name = lay.vendor_name
    highlow = lay in kn._HIGHLOW
    dtype = kn._scalar_dtype(lay)

    def nbytes(shape, dt, target=None, stride_npu=None, stride_onnx=None, clear_lsb=None, allow_input_only=False):
        return kn.nbytes(lay, shape, chip=_need(target), stride_npu=stride_npu)

    def pack(x, *, out=None, pad_value=0, target=None, stride_npu=None, stride_onnx=None, clear_lsb=None,
             allow_input_only=False):
        return kn.pack(x, lay, chip=_need(target), stride_npu=stride_npu, stride_onnx=stride_onnx,
                       clear_lsb=clear_lsb, out=out)

    def unpack(buf, shape, dt, target=None, stride_npu=None, stride_onnx=None, clear_lsb=None,
               allow_input_only=False):
        return kn.unpack(buf, lay, shape, chip=_need(target), stride_npu=stride_npu, stride_onnx=stride_onnx,
                         clear_lsb=clear_lsb, allow_input_only=allow_input_only)

    def layout(shape, dt, target=None, stride_npu=None, stride_onnx=None, clear_lsb=None, allow_input_only=False):
        return kn._plan(lay, shape, _need(target), stride_npu, stride_onnx)[2]

    def offset(shape, index, dt, target=None, stride_npu=None, stride_onnx=None, clear_lsb=None,
               allow_input_only=False):
        _, _, desc, eshape, _, _ = kn._plan(lay, shape, _need(target), stride_npu, stride_onnx)
        idx = (0,) * (len(eshape) - len(index)) + tuple(index)
        at = desc.offset_of(idx)
        if not highlow:
            return at
        e = at // 2  # scalar slot before the byte split (docs/kneron.md §7.4)
        return (e // 16) * 32 + e % 16

    def explain(shape, dt, *, limit=None, target=None, stride_npu=None, stride_onnx=None, clear_lsb=None,
                allow_input_only=False):
        from npupack.explain import vendor_explain_lines

        return vendor_explain_lines(f"kneron:{name}", shape, chip=_need(target), stride=stride_npu, limit=limit)

    targets = _targets(lay)
    examples = []
    for chip in targets:
        c = 3 if lay in (kn.DataLayout.KP_4W4C8B, kn.DataLayout.KP_4W4C8BHL) else 5
        if lay in (kn.DataLayout.KP_HW4C8B_KEEP_A, kn.DataLayout.KP_HW4C8B_DROP_A):
            c = 4
        if lay in (kn.DataLayout.KP_HW1C8B, kn.DataLayout.KP_HW1C16B_LE, kn.DataLayout.KP_HW1C16B_BE):
            c = 1
        shape = (1, c, 3, 5)
        params = {"target": chip}
        if chip in kn.V2_CHIPS:
            try:
                params["stride_npu"] = kn.predict_stride_npu(shape, lay)
            except (ValueError, UnsupportedError):
                continue
        if lay in kn._INPUT_ONLY:
            params["allow_input_only"] = True
        examples.append({"shape": shape, "params": params})
    unsigned = np.dtype(f"u{dtype.itemsize}") if dtype.kind == "i" else None
    dts = (dtype,) + ((unsigned,) if unsigned is not None else ())
    drops = highlow or lay in (kn.DataLayout.KP_8W1C16B, kn.DataLayout.KP_RAW_16B)
    return Format(f"kneron:{name}", "kneron", "feature", PARAMS, _V2_DOC if not set(targets) & set(kn.V1_CHIPS)
                  else _V1_DOC, "N,C,H,W", dts, nbytes, pack, unpack, offset, layout, explain,
                  targets=targets, examples=tuple(examples), zero_fill=True,
                  byte_order="big" if lay == kn.DataLayout.KP_HW1C16B_BE else "little",
                  byte_split=16 if highlow else 0, drops_lsb=drops,
                  note="input-only layout: unpack needs allow_input_only=True" if lay in kn._INPUT_ONLY else "")


for _lay in kn.DataLayout:
    if _lay.value:
        register(_entry(_lay))
