"""Bulk preparation: pack many models, one output directory each, with a top-level summary.

* Resumable: a model whose directory holds a manifest for the same file (sha256) and the same
  options is skipped.
* Atomic: each model is packed into a temporary sibling directory that replaces the model's
  directory only when it is complete; ``summary.json`` is written by rename.
* One model's failure is reported in its summary row and does not stop the batch.
* ``jobs > 1`` packs models in worker processes; ``client=`` (a ``dask.distributed.Client``,
  the optional ``dask`` extra) spreads them over a Dask cluster.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
import traceback
from pathlib import Path
from typing import Optional

from npupack.files import sha256_file, write_atomic

__all__ = ["pack_many", "pack_one", "OPTION_KEYS"]

#: Options of :func:`npupack.job.pack_model` that pack-many passes through (and compares when
#: resuming).
OPTION_KEYS = ("target", "precision", "quantize", "pixel_format", "winograd", "compress", "image")


def _model_id(spec: str) -> str:
    stem = Path(spec).stem if spec.endswith(".onnx") else spec
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "model"


def _ids(specs) -> list:
    """Unique directory names for the models, in order (duplicate stems get a suffix)."""
    seen, out = {}, []
    for spec in specs:
        base = _model_id(str(spec))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}-{n + 1}")
    return out


def _options(options: dict) -> dict:
    """The pack job's options with their defaults, checked (:func:`npupack.job.check_options`)."""
    from npupack.job import check_options
    from npupack.nvdla import Config

    unknown = set(options) - set(OPTION_KEYS)
    if unknown:
        raise TypeError(f"options: unknown {sorted(unknown)}; pack-many takes {list(OPTION_KEYS)}")
    opts = {"target": "nv_full", "precision": "int8", "quantize": "per_filter", "pixel_format": "auto",
            "winograd": "off", "compress": "off", "image": False}
    opts.update(options)
    try:
        config = Config.named(opts["target"])
    except (TypeError, ValueError) as e:  # its message names its own parameter, "name"
        raise type(e)(f"target: {str(e).partition(': ')[2]}") from None
    check_options(config, **{k: v for k, v in opts.items() if k != "target"})
    return opts


def _finished(model_dir: Path, digest: str, opts: dict) -> bool:
    """True when ``model_dir`` holds this model packed with these options, every surface intact
    (:func:`npupack.readback.verify_packed`): a damaged or deleted output file is repacked, not
    skipped."""
    from npupack.readback import verify_packed

    manifest = model_dir / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        m = json.loads(manifest.read_text())
        return m.get("model", {}).get("sha256") == digest and m.get("pack_many_options") == opts and \
            not verify_packed(model_dir)["problems"]
    except (OSError, ValueError, TypeError, AttributeError):  # a manifest that is not one of ours
        return False


def pack_one(spec: str, out_dir, model_id: Optional[str] = None, **options) -> dict:
    """Pack one model (a path or a known model name) into ``out_dir/<model_id>``; returns its
    summary row (``status``: "packed", "skipped" (up to date) or "error" with ``reason``).
    Never raises for a bad model; TypeError for unknown options, TypeError / ValueError for an
    option value that :func:`npupack.job.pack_model` refuses."""
    from npupack.job import pack_model
    from npupack.nvdla import Config
    from npupack.zoo import resolve_model

    opts = _options(options)
    model_id = model_id or _model_id(str(spec))
    out = Path(out_dir)
    final = out / model_id
    row = {"model": str(spec), "dir": model_id}
    t0 = time.perf_counter()
    tmp = out / f".{model_id}.{os.getpid()}.tmp"
    try:
        path = resolve_model(str(spec))
        if not path.is_file():
            raise FileNotFoundError(f"no such model file: {spec}")
        digest = sha256_file(path)
        row["sha256"] = digest
        if _finished(final, digest, opts):
            row.update(status="skipped", reason="up to date (same file and options, output verified)")
            return row
        if tmp.exists():
            shutil.rmtree(tmp)
        manifest = pack_model(path, tmp, config=Config.named(opts["target"]), precision=opts["precision"],
                              quantize=opts["quantize"], pixel_format=opts["pixel_format"],
                              winograd=opts["winograd"], compress=opts["compress"], image=opts["image"],
                              progress=False)
        manifest["pack_many_options"] = opts
        write_atomic(tmp / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
        _replace_dir(tmp, final)
        s = manifest["summary"]
        row.update(status="packed", layers=s["layers"], packed=s["packed"], unsupported=s["unsupported"],
                   errors=s["error"], bytes_in=s["bytes_in"], bytes_out=s["bytes_out"])
    except Exception as e:  # noqa: BLE001 - one model's failure must not stop the batch
        row.update(status="error", reason=f"{type(e).__name__}: {e}")
        if not isinstance(e, (ValueError, TypeError, FileNotFoundError, RuntimeError, OSError)):
            row["traceback"] = traceback.format_exc(limit=5)
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 3)
    return row


def _replace_dir(src: Path, dst: Path) -> None:
    """Put the finished directory ``src`` in place of ``dst``: rename the old one aside first,
    so ``dst`` is never a half-written mix."""
    old = dst.with_name(f".{dst.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if dst.exists():
        os.replace(dst, old)
    os.replace(src, dst)
    shutil.rmtree(old, ignore_errors=True)


def pack_many(models, out_dir, *, jobs: int = 1, client=None, **options) -> dict:
    """Pack every model into ``out_dir/<model>/`` and write ``out_dir/summary.json``.

    Parameters
    ----------
    models : sequence of str or path
        ``.onnx`` files or known model names (``npupack.zoo.MODELS``).
    out_dir : path
        Created if needed.
    jobs : int
        Worker processes on this machine (1: in this process).
    client : dask.distributed.Client, optional
        Run the models as tasks on a Dask cluster instead (every worker needs npupack and
        access to the models and ``out_dir``).
    **options
        ``target``, ``precision``, ``quantize``, ``pixel_format``, ``winograd``, ``compress``,
        ``image`` as for ``npupack pack``.

    Returns
    -------
    dict
        The summary: one row per model (status, layers, bytes, seconds; errors with their
        reason) and totals.

    Raises
    ------
    TypeError
        Unknown options; ``models`` a single path or name instead of a list of them; ``jobs``
        not an integer >= 1; a ``client`` without ``map`` and ``gather``; an ``image`` that is
        not a bool.
    ValueError
        An option value :func:`npupack.job.pack_model` refuses (unknown target, precision or mode,
        pixel format name), before any model is read.
    """
    if isinstance(models, (str, bytes, os.PathLike)):
        raise TypeError(f"models: expected a list of model paths or names, got the single {type(models).__name__} "
                        f"{models!r}")
    specs = [str(m) for m in models]
    if client is not None and not (callable(getattr(client, "map", None)) and
                                   callable(getattr(client, "gather", None))):
        raise TypeError(f"client: expected a dask.distributed.Client (with map and gather), got "
                        f"{type(client).__name__}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise TypeError(f"jobs: expected an integer >= 1, got {jobs!r}")
    opts = _options(options)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ids = _ids(specs)
    t0 = time.perf_counter()
    if client is not None:
        futures = client.map(pack_one, specs, [str(out)] * len(specs), ids, **opts, pure=False)
        rows = client.gather(futures)
    elif jobs > 1 and len(specs) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            rows = list(pool.map(_pack_one_star, [(s, str(out), i, opts) for s, i in zip(specs, ids)]))
    else:
        rows = [pack_one(s, out, i, **opts) for s, i in zip(specs, ids)]
    seconds = time.perf_counter() - t0
    totals = {k: sum(r["status"] == k for r in rows) for k in ("packed", "skipped", "error")}
    totals.update(layers=sum(r.get("packed", 0) for r in rows), bytes_in=sum(r.get("bytes_in", 0) for r in rows),
                  bytes_out=sum(r.get("bytes_out", 0) for r in rows), seconds=round(seconds, 3))
    summary = {"options": opts, "models": rows, "totals": totals}
    write_atomic(out / "summary.json", (json.dumps(summary, indent=1) + "\n").encode())
    return summary


def _pack_one_star(args):
    spec, out, model_id, opts = args
    return pack_one(spec, out, model_id, **opts)
