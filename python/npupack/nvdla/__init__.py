"""NVDLA in-memory formats (docs/nvdla.md)."""
from npupack.nvdla.config import (NV_FULL, NV_LARGE, NV_MEDIUM_512, NV_MEDIUM_1024_FULL, NV_SMALL, NV_SMALL_256,
                                  PRECISIONS, Config, element_size)
from npupack.nvdla.convert import quantize_weights, to_fp16
from npupack.nvdla.pixel import (PIXEL_FORMATS, PixelFormat, PixelPlanes, convert_pixel_precision, pack_pixels,
                                 pixel_line_strides, unpack_pixels)
from npupack.nvdla.feature import FeatureStrides, feature_layout, feature_strides, pack_feature, unpack_feature
from npupack.nvdla.weights import (WeightSurfaces, dc_layout, pack_weights, pack_weights_many, post_extension_factor,
                                   unpack_weights, weights_nbytes)
from npupack.nvdla.sparse import SparsityReport, analyze_sparsity, compress_weights, decompress_weights, prune
from npupack.nvdla.winograd import winograd_layout
from npupack.nvdla.sdp import (SdpOperand, bytes_per_atom, factorize_scales, pack_batchnorm, pack_bias, pack_eltwise,
                               pack_prelu, quantize_bias, unpack_sdp)
from npupack.nvdla.rules import ALIGNMENT, check_alignment, check_precision
from npupack.nvdla.memory import MemoryPlan, Placement

__all__ = [
    "Config", "PRECISIONS", "NV_FULL", "NV_LARGE", "NV_SMALL", "NV_SMALL_256", "NV_MEDIUM_512",
    "NV_MEDIUM_1024_FULL", "element_size", "to_fp16", "quantize_weights", "FeatureStrides",
    "feature_strides", "feature_layout", "pack_feature", "unpack_feature", "WeightSurfaces",
    "pack_weights", "pack_weights_many", "unpack_weights", "weights_nbytes", "dc_layout", "PIXEL_FORMATS",
    "PixelFormat", "PixelPlanes",
    "pack_pixels", "unpack_pixels", "pixel_line_strides", "convert_pixel_precision", "post_extension_factor",
    "SparsityReport", "analyze_sparsity", "compress_weights", "decompress_weights", "prune", "winograd_layout",
    "SdpOperand", "bytes_per_atom", "pack_bias", "pack_prelu", "pack_batchnorm", "pack_eltwise", "unpack_sdp",
    "quantize_bias", "factorize_scales", "ALIGNMENT", "check_alignment", "check_precision", "MemoryPlan", "Placement",
]
