"""npupack: pack neural-network tensors into the exact in-memory layouts accelerators read."""
from npupack._core import LayoutError
from npupack.errors import UnsupportedError
from npupack.layout import BlockedLayout

__version__ = "0.1.0"
__all__ = ["BlockedLayout", "LayoutError", "UnsupportedError", "__version__"]
