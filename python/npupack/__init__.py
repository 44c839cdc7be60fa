"""npupack: pack neural-network tensors into the exact in-memory layouts accelerators read."""
from npupack._core import LayoutError
from npupack.errors import UnsupportedError
from npupack.grammar import Layout, Tile, pack, unpack
from npupack.layout import BlockedLayout, Dim, aligned_empty
from npupack.manifest import manifest_schema
from npupack.threads import get_num_threads, num_threads, set_num_threads

__version__ = "0.1.0"
__all__ = ["BlockedLayout", "Dim", "Layout", "LayoutError", "Tile", "UnsupportedError", "aligned_empty", "pack",
           "unpack", "set_num_threads", "get_num_threads", "num_threads", "manifest_schema", "__version__"]
