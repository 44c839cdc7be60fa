"""Every public function and method, each argument in turn replaced by a wrong value (None, text,
a negative, zero, a number too large for any size, a fraction, a bool, empty and foreign
containers, a 5-D array, NaN, an arbitrary object), everything else valid. The only acceptable
outcomes are a result or a ValueError (LayoutError, UnsupportedError) / TypeError naming the
problem, or for a path an OSError: never AttributeError, KeyError, IndexError, ZeroDivisionError,
OverflowError or a crash from inside the library. The sweep that found the cases fixed in
test_parameter_checks.py, kept so that new arguments are swept too: the last test fails when a
public function is missing from the table."""
import inspect
import warnings

import numpy as np
import pytest

import npupack
import npupack.bulk as bulk
import npupack.horizon as hz
import npupack.job as job
import npupack.kneron as kn
import npupack.model as model
import npupack.nvdla as nv
import npupack.openvino as ov
import npupack.readback as readback
import npupack.zoo as zoo

ACCEPTED = (ValueError, TypeError)
BAD = [None, "x", "S8", -1, 0, 2**70, 1.5, float("nan"), True, [], (), {}, np.zeros(0), np.zeros((2,) * 5),
       object()]

W8 = np.arange(-90, 90, dtype=np.int8).reshape(4, 5, 3, 3)
W32 = np.linspace(-1, 1, 180, dtype=np.float32).reshape(4, 5, 3, 3)
X8 = np.arange(45, dtype=np.int8).reshape(1, 5, 3, 3)
X17 = np.arange(68, dtype=np.int8).reshape(1, 17, 2, 2)
IMG = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
NHWC = np.arange(12, dtype=np.int8).reshape(1, 2, 2, 3)
STRIDE_NPU = (256, 1, 64, 16)  # docs/kneron.md §7: 1W16C8B on KL730 for X8's shape
BLOCKED = npupack.Layout.parse("NCHW16c")
BOUND = BLOCKED.bind(X17.shape, np.int8)
SPARSE = nv.pack_weights(W8, compress=True)


def _bn():
    return nv.pack_batchnorm(np.ones(5, np.int8), np.ones(5, np.int8), precision="int8")


def _plan():
    return nv.MemoryPlan()


def _placed():
    plan = nv.MemoryPlan()
    plan.add("a", np.ones(10, np.uint8), kind="weight")
    return plan


PLACED = _placed()


# name -> (the callable, its valid keyword arguments). Methods are taken from an instance.
CALLS = {
    "npupack.pack": (npupack.pack, dict(x=X17, layout="NCHW16c")),
    "npupack.unpack": (npupack.unpack, dict(buf=npupack.pack(X17, "NCHW16c"), layout="NCHW16c", shape=X17.shape,
                                            dtype=np.int8)),
    "npupack.num_threads": (npupack.num_threads, dict(n=1)),
    "Layout.parse": (npupack.Layout.parse, dict(text="NCHW16c", logical="NHWC")),
    "Layout.from_onednn": (npupack.Layout.from_onednn, dict(tag="aBcd16b")),
    "Layout.bind": (BLOCKED.bind, dict(shape=X17.shape, dtype=np.int8)),
    "Layout.packed_shape": (BLOCKED.packed_shape, dict(shape=X17.shape, pad_lo=(0, 0, 1, 1))),
    "Layout.nbytes": (BLOCKED.nbytes, dict(shape=X17.shape, dtype=np.int8, pad_hi=(0, 0, 1, 1))),
    "Layout.offset_of": (BLOCKED.offset_of, dict(shape=X17.shape, index=(0, 16, 1, 1))),
    "Layout.to_onednn": (BLOCKED.to_onednn, {}),
    "Layout.describe": (BLOCKED.describe, {}),
    "BlockedLayout.pack": (BOUND.pack, dict(x=X17, pad_value=0)),
    "BlockedLayout.unpack": (BOUND.unpack, dict(buf=BOUND.pack(X17))),
    "BlockedLayout.offset_of": (BOUND.offset_of, dict(index=(0, 16, 1, 1))),
    "openvino.pack": (ov.pack, dict(x=X17, name="b_fs_yx_fsv16", pad_lo=(0, 0, 1, 1), pad_value=0)),
    "openvino.unpack": (ov.unpack, dict(buf=ov.pack(X17, "b_fs_yx_fsv16"), name="b_fs_yx_fsv16", shape=X17.shape,
                                        dtype=np.int8, check_padding=True)),
    "openvino.nbytes": (ov.nbytes, dict(name="b_fs_yx_fsv16", shape=X17.shape, dtype=np.int8,
                                        padding=((0, 0, 1, 1), (0, 0, 1, 1)))),
    "openvino.packed_shape": (ov.packed_shape, dict(name="b_fs_yx_fsv16", shape=X17.shape)),
    "openvino.offset_of": (ov.offset_of, dict(name="b_fs_yx_fsv16", shape=X17.shape, index=(0, 1, 1, 1))),
    "openvino.parse_format": (ov.parse_format, dict(name="b_fs_yx_fsv16")),
    "openvino.parse_name": (ov.parse_name, dict(name="os_is_yx_isv16_osv16")),
    "openvino.layout": (ov.layout, dict(name="b_fs_yx_fsv32")),
    "openvino.to_onednn": (ov.to_onednn, dict(name="b_fs_yx_fsv16")),
    "horizon.numpy_dtype": (hz.numpy_dtype, dict(value="S8")),
    "horizon.align_bpu_bytes": (hz.align_bpu_bytes, dict(n=100)),
    "horizon.aligned_shape": (hz.aligned_shape, dict(valid_shape=NHWC.shape, dtype="S8")),
    "horizon.strides": (hz.strides, dict(shape=(1, 2, 4, 3), dtype="S8")),
    "horizon.nbytes": (hz.nbytes, dict(valid_shape=NHWC.shape, dtype="S8", aligned_shape=(1, 2, 4, 3))),
    "horizon.pad": (hz.pad, dict(x=NHWC, aligned_shape=(1, 2, 4, 3))),
    "horizon.strip": (hz.strip, dict(buf=hz.pad(NHWC, aligned_shape=(1, 2, 4, 3)).view(np.uint8).ravel(),
                                     valid_shape=NHWC.shape, dtype="S8", aligned_shape=(1, 2, 4, 3))),
    "horizon.pack_nv12": (hz.pack_nv12, dict(y=np.zeros((4, 8), np.uint8), uv=np.zeros((2, 4, 2), np.uint8))),
    "horizon.unpack_nv12": (hz.unpack_nv12, dict(buf=np.zeros(4096, np.uint8), height=4, width=8)),
    "horizon.quantize": (hz.quantize, dict(x=np.linspace(-1, 1, 6), dtype="S8", quanti_type="SCALE", scale=0.01)),
    "horizon.dequantize": (hz.dequantize, dict(q=np.arange(6, dtype=np.int8), quanti_type="SCALE", scale=0.01)),
    "horizon.tensor_layout": (hz.tensor_layout, dict(layout="NHWC")),
    "kneron.pack": (kn.pack, dict(x=X8, layout="1W16C8B", chip="kl730", stride_npu=STRIDE_NPU)),
    "kneron.unpack": (kn.unpack, dict(buf=kn.pack(X8, "1W16C8B", chip="kl730", stride_npu=STRIDE_NPU),
                                      layout="1W16C8B", shape=X8.shape, chip="kl730", stride_npu=STRIDE_NPU)),
    "kneron.nbytes": (kn.nbytes, dict(layout="1W16C8B", shape=X8.shape, chip="kl720")),
    "kneron.quantize": (kn.quantize, dict(x=np.linspace(-1, 1, 6), radix=3, scale=1.0)),
    "kneron.dequantize": (kn.dequantize, dict(q=np.arange(6, dtype=np.int8), radix=3, scale=1.0)),
    "kneron.predict_stride_npu": (kn.predict_stride_npu, dict(shape=X8.shape, layout="1W16C8B")),
    "kneron.v1_layout": (kn.v1_layout, dict(layout="1W16C8B", chip="kl720")),
    "DataLayout.named": (kn.DataLayout.named, dict(layout="4W4C8B")),
    "DataLayout.from_firmware_code": (kn.DataLayout.from_firmware_code, dict(code=4, chip="kl720")),
    "nvdla.element_size": (nv.element_size, dict(precision="fp16")),
    "nvdla.to_fp16": (nv.to_fp16, dict(x=W32)),
    "nvdla.quantize_weights": (nv.quantize_weights, dict(w=W32, mode="per_filter", kernel_axis=0)),
    "nvdla.feature_strides": (nv.feature_strides, dict(shape=X8.shape, precision="int8", line_stride=96)),
    "nvdla.feature_layout": (nv.feature_layout, dict(shape=X8.shape, precision="int8")),
    "nvdla.pack_feature": (nv.pack_feature, dict(x=X8, surface_stride=512)),
    "nvdla.unpack_feature": (nv.unpack_feature, dict(buf=nv.pack_feature(X8), shape=X8.shape, dtype=np.int8)),
    "nvdla.pack_weights": (nv.pack_weights, dict(w=W8, groups=1, compress=True)),
    "nvdla.pack_weights image": (nv.pack_weights, dict(w=W8[:, :4], kind="image", pixel_format="T_A8B8G8R8",
                                                       stride=(2, 2), post_extension="auto")),
    "nvdla.pack_weights_many": (nv.pack_weights_many, dict(weights=[W8, W8[:2]])),
    "nvdla.unpack_weights": (nv.unpack_weights, dict(surfaces=SPARSE, logical=True)),
    "nvdla.weights_nbytes": (nv.weights_nbytes, dict(shape=W8.shape, precision="int8", kind="winograd")),
    "nvdla.dc_layout": (nv.dc_layout, dict(packed_shape=W8.shape, precision="int8")),
    "nvdla.winograd_layout": (nv.winograd_layout, dict(packed_shape=(4, 32, 4, 4), precision="fp16",
                                                       config=nv.NV_FULL)),
    "nvdla.pack_pixels": (nv.pack_pixels, dict(img=IMG, pixel_format="T_A8B8G8R8", x_offset=1)),
    "nvdla.unpack_pixels": (nv.unpack_pixels, dict(planes=nv.pack_pixels(IMG, "T_A8B8G8R8"),
                                                   pixel_format="T_A8B8G8R8", shape=IMG.shape)),
    "nvdla.pixel_line_strides": (nv.pixel_line_strides, dict(pixel_format="T_Y8___U8V8_N444", width=3)),
    "nvdla.convert_pixel_precision": (nv.convert_pixel_precision, dict(img=IMG, pixel_format="T_A8B8G8R8",
                                                                       precision="int8", offset=1, scale=2,
                                                                       truncate=1)),
    "nvdla.post_extension_factor": (nv.post_extension_factor, dict(cdata=4, s=3, r=3, stride_x=1,
                                                                   mac_atomic_c=64)),
    "nvdla.analyze_sparsity": (nv.analyze_sparsity, dict(stream=np.arange(512, dtype=np.uint8) % 3,
                                                         precision="int8", kernel_group_elements=256)),
    "nvdla.compress_weights": (nv.compress_weights, dict(stream=np.arange(512, dtype=np.uint8) % 3,
                                                         precision="int8", kernel_group_elements=256)),
    "nvdla.decompress_weights": (nv.decompress_weights, dict(data=SPARSE.weight, wmb=SPARSE.wmb, precision="int8",
                                                             n_elements=SPARSE.wmb.size * 8, wgs=SPARSE.wgs,
                                                             kernel_group_elements=SPARSE.kernel_group_elements)),
    "nvdla.prune": (nv.prune, dict(w=W32, sparsity=0.5)),
    "nvdla.bytes_per_atom": (nv.bytes_per_atom, dict(precision="int8", use="bias", data_size=1)),
    "nvdla.pack_bias": (nv.pack_bias, dict(bias=np.ones(5, np.int8), precision="int8", mul=np.ones(5, np.int8))),
    "nvdla.pack_prelu": (nv.pack_prelu, dict(slope=np.ones(5, np.int8), precision="int8")),
    "nvdla.pack_batchnorm": (nv.pack_batchnorm, dict(alu=np.ones(5, np.int8), mul=np.ones(5, np.int8),
                                                     precision="int8")),
    "nvdla.pack_eltwise": (nv.pack_eltwise, dict(alu=np.ones((5, 2, 2), np.int8), precision="int8",
                                                 line_stride=64)),
    "nvdla.unpack_sdp": (nv.unpack_sdp, dict(operand=_bn())),
    "nvdla.quantize_bias": (nv.quantize_bias, dict(bias=np.ones(2), input_scale=0.5, weight_scales=[0.5, 0.25])),
    "nvdla.factorize_scales": (nv.factorize_scales, dict(scales=[0.5, 0.25])),
    "nvdla.check_alignment": (nv.check_alignment, dict(kind="feature", address=64, line_stride=96, shape=(8, 4, 4))),
    "nvdla.check_precision": (nv.check_precision, dict(unit="conv", input="int8", output="int8")),
    "Config.named": (nv.Config.named, dict(name="nv_small")),
    "Config.atom_elements": (nv.NV_FULL.atom_elements, dict(precision="int16")),
    "Config.kernels_per_group": (nv.NV_FULL.kernels_per_group, dict(precision="fp16")),
    "Config.require_precision": (nv.NV_FULL.require_precision, dict(precision="int8", what="precision")),
    "MemoryPlan.add": (lambda **kw: _plan().add(**kw), dict(name="a", data=np.ones(10, np.uint8), kind="weight")),
    "MemoryPlan.add_weights": (lambda **kw: _plan().add_weights(**kw), dict(name="w", surfaces=SPARSE)),
    "MemoryPlan.add_operand": (lambda **kw: _plan().add_operand(**kw), dict(name="bn", operand=_bn())),
    "MemoryPlan.image": (lambda **kw: _placed().image(**kw), dict(out=np.zeros(128, np.uint8))),
    "MemoryPlan.view": (PLACED.view, dict(image=PLACED.image(), name="a")),
    "MemoryPlan.manifest": (PLACED.manifest, dict(checksums=True)),
    "zoo.resolve_model": (zoo.resolve_model, dict(spec="ppocr-det")),
    "npupack.aligned_empty": (npupack.aligned_empty, dict(nbytes=100)),
}

# Functions that the sweep leaves out, with the reason; the coverage test accepts these.
NOT_SWEPT = {
    "npupack.set_num_threads": "process-wide state; its checks are in test_threads.py",
    "npupack.get_num_threads": "takes no argument",
    "npupack.manifest_schema": "takes no argument",
    "openvino.formats": "takes no argument",
    "horizon.register_alignment_rule": "registers process-wide state; checked in test_horizon.py",
    "Config.presets": "takes no argument",
    "zoo.cache_dir": "takes no argument",
    "zoo.fetch_model": "its cache argument is a download target (network); checked in test_model.py",
}


def _sweep(fn, good, accepted=ACCEPTED):
    """Calls ``fn`` with ``good`` and with each argument replaced by each BAD value; returns the
    calls that raised anything but an ``accepted`` error."""
    fn(**good)
    params = [p.name for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)] or list(good)
    wrong = []
    for name in params:
        for value in BAD:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fn(**{**good, name: value})
            except accepted:
                pass
            except Exception as e:  # noqa: BLE001 - the point of the sweep
                wrong.append(f"{name}={value!r:.40}: {type(e).__name__}: {e}")
    return wrong


@pytest.mark.parametrize("case", list(CALLS))
def test_wrong_argument_is_a_clear_error(case):
    fn, good = CALLS[case]
    assert _sweep(fn, good) == []


def _file_calls(tmp):
    """The entry points that read or write files, with valid arguments inside ``tmp``."""
    from tests.test_model import make_model

    path = tmp / "m.onnx"
    make_model(path, as_constant=False, rng=np.random.default_rng(0))
    packed = tmp / "packed"
    job.pack_model(path, packed, config=nv.NV_FULL, progress=False)
    return {
        "job.pack_model": (job.pack_model, dict(model_path=path, out_dir=tmp / "job", config=nv.NV_FULL,
                                                progress=False)),
        "bulk.pack_one": (bulk.pack_one, dict(spec=str(path), out_dir=tmp / "one")),
        "bulk.pack_many": (bulk.pack_many, dict(models=[str(path)], out_dir=tmp / "many")),
        "model.load_onnx": (model.load_onnx, dict(path=path)),
        "model.load_batchnorms": (model.load_batchnorms, dict(path=path)),
        "model.model_files": (model.model_files, dict(path=path)),
        "job.model_record": (job.model_record, dict(model_path=path)),
        "MemoryPlan.write": (lambda **kw: _placed().write(**kw), dict(out_dir=tmp / "plan", extra={"a": 1})),
        "readback.load_packed": (readback.load_packed, dict(out_dir=packed)),
        "readback.verify_packed": (readback.verify_packed, dict(out_dir=packed)),
    }


FILE_CALLS = ("job.pack_model", "bulk.pack_one", "bulk.pack_many", "model.load_onnx", "model.load_batchnorms",
              "model.model_files", "job.model_record", "MemoryPlan.write", "readback.load_packed", "readback.verify_packed")


def test_file_entry_points_wrong_arguments(tmp_path, monkeypatch):
    """The entry points that touch files, in a scratch directory: a wrong out_dir such as "x" is
    a valid directory name and is created, and a path that names a directory or nothing may
    raise OSError."""
    monkeypatch.chdir(tmp_path)
    cases = _file_calls(tmp_path)
    assert tuple(cases) == FILE_CALLS
    wrong = {case: _sweep(fn, good, ACCEPTED + (OSError,)) for case, (fn, good) in cases.items()}
    assert wrong == {case: [] for case in cases}


MODULES = {"npupack": npupack, "openvino": ov, "horizon": hz, "kneron": kn, "nvdla": nv, "zoo": zoo, "job": job,
           "bulk": bulk, "model": model, "readback": readback}


def _methods(cls):
    """The public methods (plain, class and static) a class defines itself; not properties."""
    return {n for n, v in vars(cls).items()
            if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, (classmethod, staticmethod)))}


def _public():
    names = set()
    for prefix, module in MODULES.items():
        for n in module.__all__:
            obj = getattr(module, n)
            if inspect.isfunction(obj):
                names.add(f"{prefix}.{n}")
            elif inspect.isclass(obj) and obj.__module__.startswith("npupack"):
                names |= {f"{obj.__name__}.{m}" for m in _methods(obj)}
    return names


def test_every_public_function_and_method_is_swept():
    """Every function in the ``__all__`` of the public modules, and every method of the classes
    they export, is in CALLS, FILE_CALLS or NOT_SWEPT."""
    public = _public()
    assert {"Layout.parse", "MemoryPlan.write", "DataLayout.named", "zoo.fetch_model"} <= public
    swept = {name.split(" ")[0] for name in CALLS} | set(FILE_CALLS) | set(NOT_SWEPT)
    assert public - swept == set()
