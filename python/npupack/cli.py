"""The ``npupack`` command line.

Exit status of ``pack``, ``pack-many`` and ``verify`` (``npupack.coverage``): 0 every layer and
operand the options ask for was packed (integer operands skipped for lack of ``--calibration``
are one warning line, not a failure); 1 something failed (a layer, an operand, a model, or a
surface ``verify`` finds missing or changed); 2 bad arguments, an unreadable model or a refused
output folder; 3 layers or operands left out as unsupported (0 with ``--allow-partial``); 130
interrupted.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from npupack import __version__

__all__ = ["main"]


def _report_lines(cov: dict, quiet: bool, prefix: str = "") -> None:
    """One stderr line per failure and (unless quiet) per skip; one warning line for the integer
    operands left out for lack of a calibration table."""
    for kind, text in cov["lines"]:
        if kind == "error" or (kind == "unsupported" and not quiet):
            print(f"npupack: {prefix}{'error' if kind == 'error' else 'skipped'}: {text}", file=sys.stderr)
    if cov["need_calibration"] and not quiet:
        print(f"npupack: {prefix}warning: {cov['need_calibration']} integer bias / batch-norm operands not packed: "
              "they need activation scales (--calibration)", file=sys.stderr)


_NVDLA_FLAGS = (("target", "--target"), ("pixel_format", "--pixel-format"), ("no_image", "--no-image"),
                ("winograd", "--winograd"), ("compress", "--compress"), ("image", "--image"))


def _format_options(args) -> dict:
    """The pack job's options from the command line: NVDLA defaults for ``nvdla:dc``; for any
    other weight format the name is resolved first (a typo is refused with suggestions) and the
    NVDLA-only flags are refused (exit 2)."""
    from npupack.weight_format import resolve

    wf = resolve(args.format)
    if wf is None:
        from npupack.nvdla import Config

        return dict(config=Config.named(args.target or "nv_full"), weight_format=args.format,
                    pixel_format=None if args.no_image else (args.pixel_format or "auto"),
                    winograd=args.winograd or "off", compress=args.compress or "off", image=args.image)
    given = [flag for dest, flag in _NVDLA_FLAGS if getattr(args, dest) not in (None, False)]
    if given:
        raise ValueError(f"{', '.join(given)}: NVDLA-only option{'s' if len(given) > 1 else ''}; weight format "
                         f"{wf.name} takes --precision (fp16, fp32, int8, int16), --quantize and --calibration")
    return dict(weight_format=wf.name)


def _cmd_pack(args) -> int:
    from npupack.coverage import coverage, describe, exit_status
    from npupack.job import pack_model
    from npupack.zoo import resolve_model

    options = _format_options(args)
    model = resolve_model(args.model)
    manifest = pack_model(model, args.output, precision=args.precision, quantize=args.quantize,
                          calibration=args.calibration, progress=not args.no_progress and not args.json,
                          force=args.force, **options)
    s = manifest["summary"]
    cov = coverage(manifest)
    status = exit_status(cov, args.allow_partial)
    _report_lines(cov, args.quiet)
    target = Path(args.output) / ("image.bin" if options.get("image") else "manifest.json")
    if args.json:
        print(json.dumps({"model": str(model), "output": str(args.output), "exit_status": status,
                          "layers": cov["layers"], "operands": cov["operands"],
                          "need_calibration": cov["need_calibration"], "bytes_in": s["bytes_in"],
                          "bytes_out": s["bytes_out"], "seconds": s["seconds"],
                          "problems": [{"kind": k, "what": t} for k, t in cov["lines"]]}, indent=1))
    else:
        print(f"npupack: {s['layers']} layers of {model.name} ({describe(cov)}); {s['bytes_in']} bytes in, "
              f"{s['bytes_out']} bytes out; {s['seconds']:.2f} s -> {target}")
    return status


def _row_status(row: dict, allow_partial: bool) -> int:
    from npupack.coverage import EXIT_FAILED, exit_status

    if row["status"] not in ("packed", "skipped"):
        return EXIT_FAILED
    return exit_status({"lines": [tuple(x) for x in row.get("not_packed", [])]}, allow_partial)


def _cmd_pack_many(args) -> int:
    from npupack.bulk import pack_many
    from npupack.coverage import EXIT_INTERRUPTED, combined_status

    def show(row, write):
        if args.json:
            return
        kinds = [kind for kind, _ in row.get("not_packed", [])]
        left = "".join(f", {kinds.count(k)} {w}" for k, w in (("error", "failed"), ("unsupported", "left out"))
                       if k in kinds)
        tail = (f"{row.get('packed', 0)} of {row.get('layers', 0)} layers packed{left}, {row.get('bytes_out', 0)} "
                "bytes" if row["status"] in ("packed", "skipped") else row.get("reason", ""))
        line = f"npupack: {row['model']}: {row['status']}: {tail}; {row.get('seconds', 0):.2f} s"
        bad = row["status"] not in ("packed", "skipped") or "error" in kinds
        write(line, sys.stderr if bad else sys.stdout)
        for kind, text in row.get("not_packed", []):
            if kind == "error" or (kind == "unsupported" and not args.quiet):
                write(f"npupack: {row['dir']}: {'error' if kind == 'error' else 'skipped'}: {text}", sys.stderr)
        n = sum(kind == "calibration" for kind, _ in row.get("not_packed", []))
        if n and not args.quiet:
            write(f"npupack: {row['dir']}: warning: {n} integer bias / batch-norm operands not packed: they need "
                  "activation scales (--calibration)", sys.stderr)

    options = _format_options(args)
    if "config" in options:  # pack-many names its target (it is compared when resuming)
        options["target"] = options.pop("config").name
    summary = pack_many(args.models, args.output, jobs=args.jobs, precision=args.precision, quantize=args.quantize,
                        force=args.force, on_result=show, progress=not args.no_progress and not args.json, **options)
    t = summary["totals"]
    rows = summary["models"]
    status = combined_status(_row_status(r, args.allow_partial) for r in rows
                             if r["status"] not in ("not started", "interrupted"))
    if t.get("interrupted"):
        status = EXIT_INTERRUPTED
    if args.json:
        print(json.dumps({**summary, "exit_status": status}, indent=1))
    else:
        stopped = f", {t['not_started']} not started (interrupted)" if t.get("interrupted") else ""
        statuses = [_row_status(r, True) for r in rows if r["status"] in ("packed", "skipped")]
        partial = sum(_row_status(r, False) == 3 for r in rows if r["status"] in ("packed", "skipped"))
        flawed = f" ({statuses.count(1)} with failed layers or operands, {partial} partial)" \
            if statuses.count(1) or partial else ""
        print(f"npupack: {t['packed']} packed, {t['skipped']} up to date{flawed}, {t['error']} failed{stopped}; "
              f"{t['layers']} layers, {t['bytes_out']} bytes out; {t['seconds']:.2f} s -> "
              f"{Path(args.output) / 'summary.json'}")
    return status


def _cmd_verify(args) -> int:
    from npupack.readback import verify_packed

    from npupack.coverage import EXIT_FAILED, exit_status

    report = verify_packed(args.output)
    for problem in report["problems"]:
        print(f"npupack: {problem}", file=sys.stderr)
    lines = [tuple(x) for x in report["not_packed"]]
    cov = {"lines": lines, "need_calibration": sum(k == "calibration" for k, _ in lines)}
    _report_lines(cov, args.quiet, "not packed: ")
    status = EXIT_FAILED if report["problems"] else exit_status(cov, args.allow_partial)
    if args.json:
        print(json.dumps({**report, "exit_status": status}, indent=1))
        return status
    models = f"{report['models']} models, " if "models" in report else ""
    left = sum(k != "calibration" for k, _ in lines)
    print(f"npupack: {args.output}: {models}{report['layers']} packed layers, {report['parts']} surfaces, "
          f"{report['bytes']} bytes read; {len(report['problems'])} problems; {left} layers / operands not packed")
    return status


def _cmd_fetch(args) -> int:
    from npupack.zoo import fetch_model

    print(fetch_model(args.name, cache=args.cache_dir, quiet=True))
    return 0


def _cmd_inspect(args) -> int:
    from npupack.model import load_onnx
    from npupack.zoo import resolve_model

    layers = load_onnx(resolve_model(args.model))
    for layer in layers:
        shape = "x".join(map(str, layer.weights.shape)) if layer.weights is not None else "?"
        print(f"{layer.name:32s} {layer.op_type:14s} w={shape:16s} group={layer.group:<4d} "
              f"strides={list(layer.strides or ())} pads={list(layer.pads or ())}" +
              (f"  (error: {layer.error})" if layer.error else f"  ({layer.note})" if layer.note else ""))
    errors = sum(layer.error is not None for layer in layers)
    print(f"{len(layers)} convolution layers" + (f", {errors} malformed" if errors else ""))
    return 1 if errors else 0


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text!r}")
    return value


def _ints(text: str) -> tuple:
    try:
        return tuple(int(v) for v in text.replace("x", ",").split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _registry_params(args, fmt) -> dict:
    """The registry parameters the options of ``explain`` / ``convert`` give (docs/formats.md §3):
    only those set, so that a format refuses an option it does not take by name."""
    from npupack.formats.convert import parse_param

    params = dict(parse_param(p) for p in (getattr(args, "param", None) or ()))
    target = getattr(args, "target", None)
    chip = getattr(args, "chip", None)
    if chip is not None:  # --chip: the Kneron word for --target, kept for one release
        if target is not None and target != chip:
            raise ValueError("--chip / --target: give one of them (--chip is the older spelling of --target)")
        target = chip
    named = {"target": target, "precision": getattr(args, "precision", None),
             "line_stride": getattr(args, "line_stride", None), "surface_stride": getattr(args, "surface_stride", None),
             "batch_stride": getattr(args, "batch_stride", None), "pad_lo": getattr(args, "pad_lo", None),
             "pad_hi": getattr(args, "pad_hi", None)}
    stride = getattr(args, "stride", None)
    if stride is not None:  # Kneron stride_npu (scalars), Horizon stride (bytes), NVDLA / Winograd conv stride
        named["stride_npu" if fmt.vendor == "kneron" else "stride"] = stride
    if fmt.vendor == "horizon" and getattr(args, "role", "input") != "input":
        named["role"] = args.role
    params.update({k: v for k, v in named.items() if v is not None})
    return params


def _registry_dtype(args, fmt):
    """The element dtype for a registered format: ``--dtype`` (Horizon type names too), else the
    one ``--precision`` stands for, else int8."""
    import numpy as np

    if fmt.vendor == "horizon" and args.dtype is not None:
        from npupack.horizon import numpy_dtype

        return numpy_dtype(args.dtype)
    if args.dtype is None and getattr(args, "precision", None) is not None:
        return np.dtype({"int8": "int8", "int16": "int16", "fp16": "float16"}[args.precision])
    return np.dtype(args.dtype or "int8")


def _cmd_explain(args) -> int:
    from npupack.explain import explain_lines, nvdla_explain_lines, resolve_layout, vendor_explain_lines

    fmt = args.format
    # Names explain knew before the registry keep their output and messages (the older options too).
    legacy_nvdla = fmt in ("nvdla", "nvdla:feature", "nvdla:dc") and not args.param
    legacy_vendor = (fmt.startswith("kneron:") or fmt in ("horizon:NHWC", "horizon:NCHW")) and args.target is None \
        and not args.param
    if legacy_nvdla:
        lines = nvdla_explain_lines(fmt, args.shape, precision=args.precision or "int8",
                                    target=args.target or "nv_full", line_stride=args.line_stride,
                                    surface_stride=args.surface_stride, batch_stride=args.batch_stride,
                                    limit=args.limit)
    elif ":" in fmt and not legacy_vendor:
        from npupack import formats

        f = formats.get(fmt)
        lines = f.explain(args.shape, _registry_dtype(args, f), limit=args.limit, **_registry_params(args, f))
    elif any(v is not None for v in (args.precision, args.target, args.line_stride, args.surface_stride,
                                     args.batch_stride)) or args.param:
        raise ValueError("--precision, --target, --line-stride, --surface-stride, --batch-stride, --param: only for "
                         "nvdla:feature and nvdla:dc and the other namespaced formats (`npupack formats`)")
    elif fmt.startswith(("kneron:", "horizon:")):
        lines = vendor_explain_lines(fmt, args.shape, chip=args.chip, stride=args.stride, dtype=args.dtype or "int8",
                                     role=args.role, limit=args.limit)
    else:
        lines = explain_lines(resolve_layout(fmt), args.shape, pad_lo=args.pad_lo, pad_hi=args.pad_hi,
                              limit=args.limit)
    if args.plan:
        from npupack import formats
        from npupack.plan import describe

        if ":" in fmt:
            f = formats.get(fmt)
            desc = f.layout(args.shape, _registry_dtype(args, f), **_registry_params(args, f))
            if desc is None:
                raise ValueError(f"--plan: {f.name} is not one descriptor on the engine ({f.note or f.doc})")
        else:  # a clDNN name, layout text or oneDNN tag, bound as explain_lines binds it
            desc = resolve_layout(fmt).bind(args.shape, args.dtype or "int8", pad_lo=args.pad_lo, pad_hi=args.pad_hi)
        # The engine's own shape and element type (flattened FC formats, Kneron's (1, C, H, W), ...).
        lines = list(lines) + describe(desc, desc.shape, desc.dtype).splitlines()
    for line in lines:
        print(line)
    return 0


def _cmd_formats(args) -> int:
    from npupack import formats, openvino

    rows = [formats.get(n) for n in formats.names(vendor=args.vendor, kind=args.kind)]
    if args.json:
        print(json.dumps([{"name": f.name, "vendor": f.vendor, "kind": f.kind, "logical": f.logical,
                           "verbs": list(f.verbs), "params": f.params, "targets": list(f.targets), "doc": f.doc,
                           "dtypes": [str(d) for d in f.dtypes], "note": f.note} for f in rows], indent=1))
        return 0
    print(f"{'name':48s} {'vendor':8s} {'kind':8s} {'logical':10s} verbs")
    for f in rows:
        targets = f"  targets: {', '.join(f.targets)}" if f.targets else ""
        print(f"{f.name:48s} {f.vendor:8s} {f.kind:8s} {f.logical:10s} {', '.join(f.verbs)}{targets}")
    print(f"{len(rows)} formats; onednn:<tag> also takes any oneDNN tag the grammar reads (onednn:ABcd8b16a2b); "
          "npupack explain NAME --shape ...; npupack convert")
    if args.vendor in (None, "openvino"):
        print("left out (OpenVINO names npupack does not pack):")
        for f in openvino.formats():
            if not f.supported:
                print(f"  {f.name:46s} {f.reason.split(';')[0]}")
    if args.vendor in (None, "nvdla"):
        print("NVDLA vendor functions behind the names (npupack.nvdla):")
        print(f"  {'nvdla:feature':16s} {'N,C,H,W':9s} pack_feature, unpack_feature, feature_strides (nbytes, "
              "strides), feature_layout (offset_of), explain [--line-stride B --surface-stride B --batch-stride B]")
        print(f"  {'nvdla:dc':16s} {'K,C,R,S':9s} pack_weights(kind='dc'), unpack_weights, weights_nbytes, "
              "dc_layout (offset_of), explain")
    print("Generic: any layout text (NCHW16c, OIHW8i16o2i) or oneDNN tag (nChw16c, ABcd8b16a2b) via npupack.pack")
    return 0


def _cmd_convert(args) -> int:
    from npupack import formats
    from npupack.formats.convert import convert

    f = formats.get(args.to if args.to is not None else args.from_)
    summary = convert(args.input, args.output, to=args.to, from_=args.from_, shape=args.shape,
                      dtype=args.dtype, params=_registry_params(args, f))
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"npupack: {summary['direction']}ed {summary['input']} ({summary['bytes_in']} bytes) "
              f"{'into' if args.to else 'from'} {summary['format']} -> {summary['output']} "
              f"({summary['bytes_out']} bytes); {summary['seconds']:.3f} s")
    return 0


def _job_options(parser, *, image_help: str) -> None:
    """The options of the pack job (npupack.job.pack_model), shared by pack and pack-many. The
    NVDLA-only options default to None so that giving one with another vendor's format is refused."""
    parser.add_argument("--format", default="nvdla:dc",
                        help="weight format: nvdla:dc (default) or any registered weight format, e.g. "
                             "openvino:os_is_yx_isv16_osv16, onednn:OIhw16i16o (`npupack formats` lists them)")
    parser.add_argument("--target", default=None, help="NVDLA configuration (default nv_full; NVDLA only)")
    parser.add_argument("--precision", default="int8", choices=["int8", "int16", "fp16", "fp32"],
                        help="element type (default int8; fp32 for other vendors' formats only)")
    parser.add_argument("--quantize", default="per_filter", choices=["per_filter", "per_kernel"],
                        help="quantisation blocks for int8/int16: one scale per output channel or per tensor "
                             "(default per_filter)")
    parser.add_argument("--pixel-format", default=None,
                        help="NVDLA only: pixel format of the model input for image-input first layers (default: "
                             "T_A8B8G8R8 for int8, T_A16B16G16R16 for int16, T_A16B16G16R16_F for fp16)")
    parser.add_argument("--no-image", action="store_true",
                        help="NVDLA only: pack first layers as direct convolution too")
    parser.add_argument("--winograd", default=None, choices=["off", "auto"],
                        help="NVDLA only; auto: fp16/int16 layers whose kernel becomes 3x3 (3x3 stride 1, 5x5 "
                             "stride 2, ...) as Winograd weights (default off)")
    parser.add_argument("--compress", default=None, choices=["off", "on", "auto"],
                        help="NVDLA only: sparse weight compression (WMB/WGS); auto: only where it is smaller "
                             "(default off)")
    parser.add_argument("--image", action="store_true", help=image_help)
    _status_options(parser)
    parser.add_argument("--force", action="store_true",
                        help="replace an output folder even when it holds no npupack manifest (its files are lost)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _status_options(parser) -> None:
    parser.add_argument("--allow-partial", action="store_true",
                        help="exit 0 when layers or operands were left out as unsupported (default: exit 3)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no stderr line per skipped layer or operand")


def _param_option(parser) -> None:
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="any other parameter of the format (groups=2, pixel_format=T_R8, x_offset=1, "
                             "stride_npu=96,1,48,16); repeat it")


def build_parser() -> argparse.ArgumentParser:
    from npupack.zoo import MODELS

    p = argparse.ArgumentParser(prog="npupack", description="Pack neural-network tensors into accelerator layouts.",
                                epilog="exit status of pack / pack-many / verify: 0 all packed; 1 something failed; "
                                       "2 bad arguments or refused output folder; 3 layers left out as unsupported "
                                       "(0 with --allow-partial); 130 interrupted")
    p.add_argument("--version", action="version", version=f"npupack {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    pk = sub.add_parser("pack", help="pack every weight-bearing layer of an ONNX model as NVDLA weights or in "
                        "another registered weight format (--format)")
    pk.add_argument("model", help=f"an .onnx file, or a known model name ({', '.join(sorted(MODELS))})")
    _job_options(pk, image_help="NVDLA only: one aligned image.bin with every weight, WMB/WGS, bias and batch-norm "
                                "surface")
    pk.add_argument("--calibration", type=Path, default=None,
                    help="calibration table (JSON, tensor -> scale or min/max) for integer bias, rescale and "
                         "batch-norm operands (other vendors' formats: int32 biases)")
    pk.add_argument("-o", "--output", required=True, help="output directory")
    pk.set_defaults(func=_cmd_pack)

    pm = sub.add_parser("pack-many", help="pack many models, one directory each, resumable, with a summary")
    pm.add_argument("models", nargs="+", help=".onnx files or known model names")
    pm.add_argument("-o", "--output", required=True, help="output directory (one subdirectory per model)")
    pm.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    _job_options(pm, image_help="NVDLA only: one aligned image.bin per model")
    pm.set_defaults(func=_cmd_pack_many)

    ve = sub.add_parser("verify", help="check the sha256 of every surface of a pack output directory and that "
                        "every layer unpacks")
    ve.add_argument("output", help="the directory written by pack (manifest.json and its files) or pack-many "
                    "(summary.json and one directory per model)")
    _status_options(ve)
    ve.set_defaults(func=_cmd_verify)

    fm = sub.add_parser("fetch-model", help="download a known real model into the cache and print its path")
    fm.add_argument("name", choices=sorted(MODELS))
    fm.add_argument("--cache-dir", type=Path, default=None)
    fm.set_defaults(func=_cmd_fetch)

    ex = sub.add_parser("explain", help="print where each element of a layout goes")
    ex.add_argument("format", help="a registered name (`npupack formats`: nvdla:feature, nvdla:dc, openvino:<name>, "
                    "onednn:<tag>, kneron:<layout> with --target, horizon:NHWC|NCHW, ...), or without a namespace a "
                    "clDNN format name (b_fs_yx_fsv16), layout text (NCHW16c) or oneDNN tag")
    ex.add_argument("--shape", type=_ints, required=True, help="logical shape, e.g. 2,2,2,2")
    ex.add_argument("--pad-lo", type=_ints, default=None, help="lower padding per dim")
    ex.add_argument("--pad-hi", type=_ints, default=None, help="upper padding per dim")
    ex.add_argument("--limit", type=_count, default=None, help="print at most this many positions")
    ex.add_argument("--chip", default=None, help="Kneron chip; older spelling of --target, kept for one release")
    ex.add_argument("--stride", type=_ints, default=None,
                    help="Kneron stride_npu (scalars), Horizon stride (bytes), or the convolution stride of NVDLA "
                         "Winograd / deconvolution / image weights")
    ex.add_argument("--dtype", default=None,
                    help="element type: NumPy dtype, or for Horizon an hbDNNDataType name (S8, U8, F16, ...); "
                         "default int8 (NVDLA: the one --precision stands for)")
    ex.add_argument("--role", default="input", choices=["input", "output"], help="Horizon tensor role")
    ex.add_argument("--precision", default=None, choices=["int8", "int16", "fp16"],
                    help="NVDLA element precision (default int8)")
    ex.add_argument("--target", default=None, help="NVDLA configuration (nv_full default, nv_small, ...), Kneron "
                    "chip (kl520 ... kl830) or Horizon alignment rule (x3, x5)")
    ex.add_argument("--line-stride", type=int, default=None, help="NVDLA feature line stride, bytes")
    ex.add_argument("--surface-stride", type=int, default=None, help="NVDLA feature surface stride, bytes")
    ex.add_argument("--batch-stride", type=int, default=None, help="NVDLA feature batch stride, bytes")
    _param_option(ex)
    ex.add_argument("--plan", action="store_true", help="also print the plan the C++ engine runs for a registered "
                    "name whose format is one descriptor (npupack.plan.describe)")
    ex.set_defaults(func=_cmd_explain)

    fo = sub.add_parser("formats", help="list every registered format with its vendor, kind and verbs")
    fo.add_argument("--vendor", default=None, choices=["nvdla", "openvino", "onednn", "kneron", "horizon"])
    fo.add_argument("--kind", default=None, choices=["feature", "weights", "pixel", "image", "sdp"])
    fo.add_argument("--json", action="store_true", help="one JSON object per format: name, vendor, kind, logical "
                    "axes, verbs, parameters, targets, docs section")
    fo.set_defaults(func=_cmd_formats)

    cv = sub.add_parser("convert", help="pack a tensor file (.npy or raw) into a registered format, or unpack a "
                        "format's bytes back into a tensor file")
    cv.add_argument("input", type=Path, help=".npy or raw file")
    way = cv.add_mutually_exclusive_group(required=True)
    way.add_argument("--to", default=None, help="pack into this registered format (`npupack formats`)")
    way.add_argument("--from", dest="from_", default=None, help="unpack from this registered format")
    cv.add_argument("--shape", type=_ints, default=None, help="logical shape, the format's order (needed with "
                    "--from and for a raw input)")
    cv.add_argument("--dtype", default=None, help="element dtype (needed with --from and for a raw input)")
    cv.add_argument("--target", default=None, help="NVDLA configuration, Kneron chip or Horizon alignment rule")
    cv.add_argument("--precision", default=None, choices=["int8", "int16", "fp16"], help="NVDLA precision")
    cv.add_argument("--stride", type=_ints, default=None,
                    help="Kneron stride_npu (scalars), Horizon stride (bytes), NVDLA Winograd/image conv stride")
    _param_option(cv)
    cv.add_argument("-o", "--output", type=Path, required=True, help="output file: .npy, or raw for any other suffix")
    cv.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    cv.set_defaults(func=_cmd_convert)

    ins = sub.add_parser("inspect", help="list the weight-bearing layers of an ONNX model")
    ins.add_argument("model")
    ins.set_defaults(func=_cmd_inspect)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C: the job has cleaned up after itself
        print("npupack: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head`: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, TypeError, OSError, RuntimeError, ImportError) as e:  # OSError: unwritable -o, disk full
        print(f"npupack: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
