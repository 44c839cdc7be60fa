"""Error types. ``LayoutError`` (raised by the C++ core as well) and ``UnsupportedError`` are
both ``ValueError`` subclasses, so callers may catch ``ValueError``."""
from npupack._core import LayoutError

__all__ = ["LayoutError", "UnsupportedError"]


class UnsupportedError(ValueError):
    """A valid request that the target configuration or format cannot do."""
