"""NVDLA hardware configurations (docs/nvdla.md §1: Configurations)."""
from __future__ import annotations

from dataclasses import dataclass

from npupack.errors import LayoutError, UnsupportedError

__all__ = ["Config", "PRECISIONS", "NV_FULL", "NV_LARGE", "NV_SMALL", "NV_SMALL_256",
           "NV_MEDIUM_512", "NV_MEDIUM_1024_FULL", "element_size"]

PRECISIONS = ("int8", "int16", "fp16")


def element_size(precision: str) -> int:
    """Bytes per element of an NVDLA precision: int8 = 1, int16 = fp16 = 2 (``es``; docs/nvdla.md §1.1).
    Raises ValueError for any other precision."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {PRECISIONS}")
    return 1 if precision == "int8" else 2


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class Config:
    """One NVDLA hardware configuration, in the field's terms (docs/nvdla.md §1.1).

    Attributes
    ----------
    name : str
        Preset name or a user label.
    atom_bytes : int
        Memory atom in bytes: the feature-data atom cube is 1x1x``atom_bytes``.
    mac_atomic_c : int
        MAC atomic C, in elements: channels per weight channel block, for every precision.
    mac_atomic_k : int
        MAC atomic K for int8: kernels per kernel group (16-bit precisions use half).
    cbuf_entry_width : int
        CBUF bank entry width in bytes (informational; nvdla/sw's weight tail alignment).
    weight_size_alignment : int
        Tail alignment of uncompressed weight surfaces, bytes (default 128, docs/nvdla.md §5.3).
    precisions : tuple of str
        Supported subset of ("int8", "int16", "fp16").
    winograd, compression : bool
        Whether Winograd weights / sparse weight compression are available.

    Raises
    ------
    LayoutError
        A field breaks the rules of docs/nvdla.md §1.3 (message names the field).
    """

    name: str
    atom_bytes: int
    mac_atomic_c: int
    mac_atomic_k: int
    cbuf_entry_width: int
    weight_size_alignment: int = 128
    precisions: tuple = ("int8",)
    winograd: bool = False
    compression: bool = False

    def __post_init__(self):
        for f in ("atom_bytes", "mac_atomic_c", "mac_atomic_k", "cbuf_entry_width", "weight_size_alignment"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise LayoutError(f"Config.{f}: must be a positive integer, got {v!r} (docs/nvdla.md §1.3)")
        if not _is_pow2(self.atom_bytes):
            raise LayoutError(f"Config.atom_bytes: must be a power of two, got {self.atom_bytes} (docs/nvdla.md §1.3)")
        if not _is_pow2(self.weight_size_alignment) or self.weight_size_alignment > 4096:
            raise LayoutError("Config.weight_size_alignment: must be a power of two <= 4096, got "
                              f"{self.weight_size_alignment} (docs/nvdla.md §1.3)")
        precisions = tuple(self.precisions)
        object.__setattr__(self, "precisions", precisions)
        if not precisions or any(p not in PRECISIONS for p in precisions) or len(set(precisions)) != len(precisions):
            raise LayoutError(f"Config.precisions: must be a non-empty subset of {PRECISIONS}, got {precisions!r} "
                              "(docs/nvdla.md §1.3)")
        if any(p != "int8" for p in precisions) and (self.atom_bytes % 2 or self.mac_atomic_k % 2):
            raise LayoutError("Config: 16-bit precisions need an even atom_bytes and mac_atomic_k (docs/nvdla.md §1.3)")
        if self.winograd and any(self.atom_elements(p) % 4 for p in precisions):
            raise LayoutError("Config.winograd: the atom must hold a multiple of 4 elements in every "
                              "precision (docs/nvdla.md §1.3)")
        # Configs key the layout caches of every packer; hash the fields once, not per call.
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f) for f in _FIELDS)))

    def __hash__(self) -> int:
        return self._hash

    # Derived quantities (docs/nvdla.md §1.1).
    def atom_elements(self, precision: str) -> int:
        """Feature atom in elements (``A``): ``atom_bytes // es``."""
        return self.atom_bytes // element_size(precision)

    def kernels_per_group(self, precision: str) -> int:
        """Kernels per kernel group (``kpg``): MAC atomic K for int8, half of it for 16-bit."""
        return self.mac_atomic_k if element_size(precision) == 1 else self.mac_atomic_k // 2

    @property
    def channels_per_block(self) -> int:
        """Channels per weight channel block (``cb``): MAC atomic C elements, any precision."""
        return self.mac_atomic_c

    def require_precision(self, precision: str, what: str = "precision") -> None:
        """Raise UnsupportedError unless ``precision`` is supported by this configuration."""
        element_size(precision)
        if precision not in self.precisions:
            raise UnsupportedError(f"{what}: {precision!r} is not supported by config {self.name!r}, which "
                                   f"supports {list(self.precisions)} (docs/nvdla.md §1.2)")

    @staticmethod
    def named(name: str) -> "Config":
        """The preset called ``name`` (case-insensitive; ``"nvdlav1"`` is NV_FULL).
        Raises ValueError naming the known presets for any other name."""
        if not isinstance(name, str):
            raise TypeError(f"name: expected a str, got {type(name).__name__}")
        key = name.strip().lower()
        key = "nv_full" if key == "nvdlav1" else key
        try:
            return _PRESETS[key]
        except KeyError:
            raise ValueError(f"name: unknown NVDLA configuration {name!r}; known: {sorted(_PRESETS)} "
                             "(docs/nvdla.md §1.2)") from None

    @staticmethod
    def presets() -> dict:
        """All presets by name."""
        return dict(_PRESETS)


def check_config(config) -> None:
    """TypeError naming ``config`` unless it is a :class:`Config` (a preset or your own)."""
    if not isinstance(config, Config):
        raise TypeError(f"config: expected an npupack.nvdla.Config, got {type(config).__name__}")


_FIELDS = ("name", "atom_bytes", "mac_atomic_c", "mac_atomic_k", "cbuf_entry_width", "weight_size_alignment",
           "precisions", "winograd", "compression")
assert _FIELDS == tuple(Config.__dataclass_fields__)

NV_FULL = Config("nv_full", 32, 64, 32, 128, 128, ("int8", "int16", "fp16"), winograd=True, compression=True)
NV_LARGE = Config("nv_large", 32, 64, 32, 64)
NV_SMALL = Config("nv_small", 8, 8, 8, 8)
NV_SMALL_256 = Config("nv_small_256", 8, 32, 8, 32)
NV_MEDIUM_512 = Config("nv_medium_512", 16, 32, 16, 32)
NV_MEDIUM_1024_FULL = Config("nv_medium_1024_full", 32, 32, 32, 32)

_PRESETS = {c.name: c for c in (NV_FULL, NV_LARGE, NV_SMALL, NV_SMALL_256, NV_MEDIUM_512, NV_MEDIUM_1024_FULL)}
