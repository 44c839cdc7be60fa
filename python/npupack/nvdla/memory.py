"""One compiler-ready memory image: named surfaces placed with their start and size alignment
(docs/nvdla.md §17, §15).

``MemoryPlan`` only computes offsets while surfaces are added; ``image()`` then allocates the
image once and copies every surface into its slot (gaps and padding zero), so building the image
costs about one copy of its bytes.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from npupack._gate import check_disjoint
from npupack.errors import LayoutError
from npupack.layout import as_byte_buffer, check_out
from npupack.nvdla.config import NV_FULL, Config, check_config
from npupack.nvdla.rules import alignment_rules

__all__ = ["Placement", "MemoryPlan"]


@dataclass(frozen=True)
class Placement:
    """Where one surface sits in the image. Offsets and sizes in bytes.

    Attributes
    ----------
    name, kind : str
        Unique name; alignment kind (a row of ``alignment_rules``).
    offset : int
        From the start of the image; ``address = base_address + offset``.
    size : int
        Bytes of the surface's data.
    reserved : int
        ``size`` rounded up to the kind's size alignment (the padding is zero).
    alignment : int
        Start alignment that was honoured.
    meta : dict
        Caller's description (shapes, strides, register values...), copied into the manifest.
    """

    name: str
    kind: str
    offset: int
    size: int
    reserved: int
    alignment: int
    address: int
    meta: dict = field(default_factory=dict)


def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty string, got {name!r}")


class MemoryPlan:
    """Places named surfaces in one memory image (docs/nvdla.md §17, alignment §15.2).

    Surfaces are placed in the order they are added, each at the next offset that is a multiple
    of its start alignment; each reserves its size rounded up to its size alignment. Surfaces
    never overlap. Raises ValueError / LayoutError as described on each method.

    Parameters
    ----------
    config : Config
        Decides the alignment table (``alignment_rules(config)``).
    base_address : int
        Address of the image's first byte in the accelerator's memory, a multiple of 256 (the
        largest start alignment), so that ``address % alignment == offset % alignment``.
    """

    def __init__(self, config: Config = NV_FULL, *, base_address: int = 0):
        check_config(config)
        if isinstance(base_address, bool) or not isinstance(base_address, (int, np.integer)) or base_address < 0 \
                or base_address % 256:
            raise LayoutError(f"base_address: must be a multiple of 256 bytes >= 0, got {base_address!r}")
        self.config = config
        self.base_address = int(base_address)
        self._rules = alignment_rules(config)
        self._placements: list[Placement] = []
        self._data: list[np.ndarray] = []
        self._names: set = set()
        self._end = 0

    @property
    def placements(self) -> tuple:
        """The placements in image order."""
        return tuple(self._placements)

    @property
    def nbytes(self) -> int:
        """Size of the image in bytes (end of the last reservation)."""
        return self._end

    def __len__(self) -> int:
        return len(self._placements)

    def __getitem__(self, name: str) -> Placement:
        for p in self._placements:
            if p.name == name:
                return p
        raise KeyError(name)

    def add(self, name: str, data, *, kind: str, meta: Optional[dict] = None) -> Placement:
        """Place one surface.

        Parameters
        ----------
        name : str
            Unique within the plan.
        data : uint8 array or bytes
            The surface bytes (kept by reference until ``image()``; not modified).
        kind : str
            Alignment kind: "weight", "weight_compressed", "wmb", "wgs", "bias", "prelu",
            "batchnorm", "eltwise", "feature" or "pixel".
        meta : dict, optional
            JSON-serialisable description for the manifest.

        Returns
        -------
        Placement

        Raises
        ------
        ValueError
            Duplicate or empty name; unknown kind.
        TypeError
            ``data`` not bytes / uint8.
        """
        _check_name(name)
        if name in self._names:
            raise ValueError(f"name: {name!r} is already placed")
        if kind not in self._rules:
            raise ValueError(f"kind: {kind!r} is not one of {tuple(self._rules)} (docs/nvdla.md §15)")
        buf = as_byte_buffer(data, "data")
        rule = self._rules[kind]
        align = rule.address
        offset = -(-self._end // align) * align
        size_align = rule.size or 1
        reserved = -(-buf.size // size_align) * size_align
        p = Placement(name, kind, offset, int(buf.size), reserved, align, self.base_address + offset,
                      dict(meta or {}))
        self._placements.append(p)
        self._data.append(buf)
        self._names.add(name)
        self._end = offset + reserved
        return p

    def add_weights(self, name: str, surfaces, meta: Optional[dict] = None) -> list:
        """Place a layer's weight surfaces: the weight (or compressed DATA), WMB and WGS; for a
        deconvolution tuple every set (``name/set<i>``). Returns the placements. Raises ValueError
        for an empty or duplicate ``name`` or an empty sequence of sets, TypeError for anything
        but WeightSurfaces; nothing is placed then."""
        from npupack.nvdla.surfaces import WeightSurfaces

        _check_name(name)
        sets = surfaces if isinstance(surfaces, (tuple, list)) else (surfaces,)
        if not sets:
            raise ValueError("surfaces: expected WeightSurfaces or a non-empty sequence of them (deconvolution "
                             "sets), got an empty one")
        for ws in sets:
            if not isinstance(ws, WeightSurfaces):
                raise TypeError(f"surfaces: expected WeightSurfaces, got {type(ws).__name__}")
        out = []
        for i, ws in enumerate(sets):
            stem = name if len(sets) == 1 and ws.kind != "deconv" else f"{name}/set{i}"
            m = dict(meta or {}, encoding=ws.encoding, weight_kind=ws.kind, precision=ws.precision,
                     packed_shape=list(ws.packed_shape), meaningful_bytes=ws.meaningful_bytes)
            if ws.phase is not None:
                m["phase"] = list(ws.phase)
            out.append(self.add(f"{stem}/weight", ws.weight, kind="weight_compressed" if ws.compressed else "weight",
                                meta=m))
            if ws.compressed:
                out.append(self.add(f"{stem}/wmb", ws.wmb, kind="wmb"))
                out.append(self.add(f"{stem}/wgs", ws.wgs, kind="wgs"))
        return out

    def add_operand(self, name: str, operand, meta: Optional[dict] = None) -> Optional[Placement]:
        """Place an SDP operand (``SdpOperand``); per-layer operands have no memory and return
        None (their register values belong in the caller's manifest)."""
        from npupack.nvdla.sdp import SdpOperand

        if not isinstance(operand, SdpOperand):
            raise TypeError(f"operand: expected SdpOperand, got {type(operand).__name__}")
        if operand.data is None:
            return None
        m = dict(meta or {}, use=operand.use, mode=operand.mode, precision=operand.precision,
                 components=operand.components, data_size=operand.data_size, shape=list(operand.shape))
        if operand.line_stride is not None:
            m.update(line_stride=operand.line_stride, surface_stride=operand.surface_stride)
        return self.add(name, operand.data, kind=operand.alignment_kind, meta=m)

    def image(self, out=None) -> np.ndarray:
        """The image: uint8 of ``nbytes`` bytes, every surface at its offset, zero elsewhere.
        ``out`` (a writable uint8 buffer of at least ``nbytes``) receives it. Raises LayoutError
        for a too small ``out``, or one that overlaps a surface's bytes (the plan keeps the
        arrays it was given, which it reads while it writes ``out``)."""
        n = self._end
        if out is not None:
            check_disjoint(out, {"a surface": self._data})
        img = check_out(out, n)[:n] if out is not None else np.empty(n, dtype=np.uint8)
        pos = 0
        for p, data in zip(self._placements, self._data):
            if p.offset > pos:
                img[pos:p.offset] = 0
            img[p.offset:p.offset + p.size] = data
            pos = p.offset + p.size
        if n > pos:
            img[pos:] = 0
        return img

    def view(self, image, name: str) -> np.ndarray:
        """The bytes of surface ``name`` inside ``image`` (a uint8 view of ``image``, ``size`` bytes
        from the surface's offset). Raises ValueError for a name that is not placed, LayoutError
        for an image too small to hold the surface."""
        _check_name(name)
        if name not in self._names:
            raise ValueError(f"name: no surface {name!r} is placed in this plan")
        p = self[name]
        buf = as_byte_buffer(image, "image")
        if buf.size < p.offset + p.size:
            raise LayoutError(f"image: holds {buf.size} bytes, {name!r} ends at {p.offset + p.size}")
        return buf[p.offset:p.offset + p.size]

    def manifest(self, *, checksums: bool = False) -> dict:
        """JSON-ready description: config, base address, size and every placement (with the
        sha256 of each surface when ``checksums``)."""
        surfaces = []
        for p, data in zip(self._placements, self._data):
            entry = {**p.meta, "name": p.name, "kind": p.kind, "offset": p.offset, "address": p.address,
                     "size": p.size, "reserved": p.reserved, "alignment": p.alignment}
            if checksums:
                entry["sha256"] = hashlib.sha256(memoryview(data)).hexdigest()
            surfaces.append(entry)
        return {"config": self.config.name, "base_address": self.base_address, "nbytes": self._end,
                "surfaces": surfaces}

    def write(self, out_dir, *, extra: Optional[dict] = None) -> dict:
        """Write ``image.bin`` and ``manifest.json`` into ``out_dir`` (created), atomically
        (temporary file + rename, the manifest last). Returns the manifest, which also holds
        the image's sha256 and ``extra``."""
        from npupack.files import write_atomic

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        img = self.image()
        write_atomic(out / "image.bin", img)
        manifest = {**(extra or {}), "image": {"file": "image.bin", "sha256": hashlib.sha256(memoryview(img))
                                               .hexdigest(), **self.manifest(checksums=True)}}
        write_atomic(out / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
        return manifest
