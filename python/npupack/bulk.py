"""Bulk preparation: pack many models, one output directory each, with a top-level summary
(docs/design.md §5.7).

* Resumable: a model whose directory holds a manifest for the same file and external-data files
  (sha256, taken before packing) and the same options, every surface intact, is skipped.
* Atomic: each model is packed into a new sibling folder that replaces the model's folder in one
  step when complete (:func:`npupack.job.pack_model`); a model folder that is not npupack's is
  refused unless ``force``; ``summary.json`` is written by rename, always, also when the batch is
  interrupted (the models not reached marked "not started").
* One model's failure, or the death of the worker packing it, is reported in its summary row and
  does not stop the batch.
* Folder names are the model file stems, made unique with a short hash of the model's path where
  stems collide, so each model keeps its folder from run to run.
* ``jobs > 1`` packs each model in a worker process of its own; ``client=`` (a
  ``dask.distributed.Client``, the optional ``dask`` extra) spreads them over a Dask cluster.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Optional

from npupack.files import remove_stale_staging, write_atomic

__all__ = ["pack_many", "pack_one", "OPTION_KEYS"]

#: Options of :func:`npupack.job.pack_model` that pack-many passes through (and compares when
#: resuming); ``target`` names the NVDLA config.
OPTION_KEYS = ("target", "precision", "quantize", "pixel_format", "winograd", "compress", "image", "weight_format")
#: The options another vendor's weight format takes (docs/design.md §5.7).
VENDOR_OPTION_KEYS = ("weight_format", "precision", "quantize")


def _model_id(spec: str) -> str:
    stem = Path(spec).stem if spec.endswith(".onnx") else spec
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "model"


def _ids(specs) -> list:
    """Unique folder names for the models, in order: the stem, or where stems collide the stem
    plus a short hash of the model's absolute path (stable from run to run)."""
    bases = [_model_id(str(spec)) for spec in specs]
    ids = list(bases)
    for _ in range(3):  # a hashed name could equal another model's stem: hash that one too
        counts: dict = {}
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
        clash = [k for k, i in enumerate(ids) if counts[i] > 1]
        if not clash:
            return ids
        for k in clash:
            where = os.path.abspath(str(specs[k])) if str(specs[k]).endswith(".onnx") else str(specs[k])
            ids[k] = f"{bases[k]}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"
    counts = {}
    for k, i in enumerate(ids):  # the same path listed twice: one folder each, numbered
        counts[i] = counts.get(i, 0) + 1
        if counts[i] > 1:
            ids[k] = f"{i}-{counts[i]}"
    return ids


def _options(options: dict) -> dict:
    """The pack job's options with their defaults, checked (:func:`npupack.job.check_options`).
    NVDLA options are recorded without ``weight_format`` (as before it existed, so that earlier
    outputs still resume); another vendor's format records :data:`VENDOR_OPTION_KEYS` only and
    refuses the NVDLA-only options, ``target`` included."""
    from npupack.job import check_options
    from npupack.nvdla import Config
    from npupack.weight_format import NVDLA_DEFAULT, resolve

    unknown = set(options) - set(OPTION_KEYS)
    if unknown:
        raise TypeError(f"options: unknown {sorted(unknown)}; pack-many takes {list(OPTION_KEYS)}")
    wf = resolve(options.get("weight_format", NVDLA_DEFAULT))
    if wf is not None:
        if options.get("target") is not None:
            raise ValueError(f"target: an NVDLA-only option ({options['target']!r}); weight format {wf.name} takes "
                             f"{', '.join(VENDOR_OPTION_KEYS)}")
        opts = {"weight_format": wf.name, "precision": "int8", "quantize": "per_filter"}
        opts.update((k, v) for k, v in options.items() if k in VENDOR_OPTION_KEYS)
        opts["weight_format"] = wf.name
        # The NVDLA-only options are refused by the job's own check, with their defaults unset.
        nvdla = {"pixel_format": "auto", "winograd": "off", "compress": "off", "image": False}
        nvdla.update((k, v) for k, v in options.items() if k in nvdla)
        check_options(None, precision=opts["precision"], quantize=opts["quantize"], weight_format=wf.name, **nvdla)
        return opts
    options = {k: v for k, v in options.items() if k != "weight_format"}
    opts = {"target": "nv_full", "precision": "int8", "quantize": "per_filter", "pixel_format": "auto",
            "winograd": "off", "compress": "off", "image": False}
    opts.update(options)
    try:
        config = Config.named(opts["target"])
    except (TypeError, ValueError) as e:  # its message names its own parameter, "name"
        raise type(e)(f"target: {str(e).partition(': ')[2]}") from None
    check_options(config, **{k: v for k, v in opts.items() if k != "target"})
    return opts


def _finished(model_dir: Path, record: dict, opts: dict):
    """The manifest of ``model_dir`` when it holds this model (same file and external-data
    checksums) packed with these options, every surface intact
    (:func:`npupack.readback.verify_packed`); None otherwise, so that a damaged, deleted or
    malformed output is repacked, not skipped."""
    from npupack.files import read_inside
    from npupack.readback import verify_packed

    try:
        m = json.loads(read_inside(model_dir, "manifest.json", "manifest"))
        if m.get("model") == record and m.get("pack_many_options") == opts and \
                not verify_packed(model_dir)["problems"]:
            return m
    except Exception:  # noqa: BLE001 - any fault in the old output means: pack again
        pass
    return None


def _row_counts(manifest: dict) -> dict:
    from npupack.coverage import coverage

    s, cov = manifest["summary"], coverage(manifest)
    return dict(layers=s["layers"], packed=s["packed"], unsupported=s["unsupported"], errors=s["error"],
                operands=cov["operands"], not_packed=[list(x) for x in cov["lines"]], bytes_in=s["bytes_in"],
                bytes_out=s["bytes_out"])


def pack_one(spec: str, out_dir, model_id: Optional[str] = None, *, force: bool = False, **options) -> dict:
    """Pack one model (a path or a known model name) into ``out_dir/<model_id>``; returns its
    summary row (``status``: "packed", "skipped" (up to date) or "error" with ``reason``; layer
    and operand counts and ``not_packed``: ``[kind, text]`` per layer or operand left out).
    The model and its external-data files are hashed before packing. A folder that is not
    npupack's is refused (an error row) unless ``force``. Never raises for a bad model;
    TypeError for unknown options, TypeError / ValueError for an option value that
    :func:`npupack.job.pack_model` refuses."""
    from npupack.job import model_record, pack_model
    from npupack.nvdla import Config
    from npupack.zoo import resolve_model

    opts = _options(options)
    model_id = model_id or _model_id(str(spec))
    final = Path(out_dir) / model_id
    row = {"model": str(spec), "dir": model_id}
    t0 = time.perf_counter()
    try:
        path = resolve_model(str(spec))
        if not path.is_file():
            raise FileNotFoundError(f"no such model file: {spec}")
        record = model_record(path)
        row["sha256"] = record["sha256"]
        done = _finished(final, record, opts)
        if done is not None:
            row.update(status="skipped", reason="up to date (same files and options, output verified)",
                       **_row_counts(done))
            return row
        if "weight_format" in opts:  # another vendor's format: no NVDLA options
            job = dict(weight_format=opts["weight_format"])
        else:
            job = dict(config=Config.named(opts["target"]), pixel_format=opts["pixel_format"],
                       winograd=opts["winograd"], compress=opts["compress"], image=opts["image"])
        manifest = pack_model(path, final, precision=opts["precision"], quantize=opts["quantize"], progress=False,
                              force=force, extra={"pack_many_options": opts}, **job)
        row.update(status="packed", **_row_counts(manifest))
    except Exception as e:  # noqa: BLE001 - one model's failure must not stop the batch
        row.update(status="error", reason=f"{type(e).__name__}: {e}")
        if not isinstance(e, (ValueError, TypeError, FileNotFoundError, RuntimeError, OSError)):
            row["traceback"] = traceback.format_exc(limit=5)
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 3)
    return row


def pack_many(models, out_dir, *, jobs: int = 1, client=None, force: bool = False,
              on_result: Optional[Callable] = None, progress: bool = False, **options) -> dict:
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
    force : bool
        Replace model folders that hold no npupack manifest (otherwise such a model is an error
        row and its folder is left alone).
    on_result : callable, optional
        Called as ``on_result(row, write)`` as each model finishes (``write(text, stream)``
        prints without breaking the progress bar).
    progress : bool
        An overall progress bar (tqdm) on a terminal.
    **options
        ``target``, ``precision``, ``quantize``, ``pixel_format``, ``winograd``, ``compress``,
        ``image``, ``weight_format`` as for ``npupack pack`` (another vendor's weight format
        takes ``precision`` and ``quantize`` only; ValueError for an NVDLA-only option).

    Returns
    -------
    dict
        The summary: one row per model (status, layers, bytes, seconds; errors with their
        reason; a model whose worker died is an error row) and totals. On Ctrl-C the summary
        is written with the models not reached marked "not started" (``totals["interrupted"]``)
        and KeyboardInterrupt is raised again after ``summary.json`` is written, unless
        ``on_result`` is given (the command line), which gets the summary returned instead.

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
    remove_stale_staging(out)
    ids = _ids(specs)
    t0 = time.perf_counter()
    rows: list = [None] * len(specs)
    bar = _bar(len(specs), progress)

    def write(text, stream=sys.stdout):
        if bar is not None:
            bar.write(text, file=stream)
        else:
            print(text, file=stream, flush=True)

    def finished(i, row):
        rows[i] = row
        if bar is not None:
            bar.update(1)
        if on_result is not None:
            on_result(row, write)

    interrupted = False
    try:
        tasks = [(s, str(out), i, force, opts) for s, i in zip(specs, ids)]
        if client is not None:
            _run_dask(client, tasks, finished)
        elif jobs > 1 and len(specs) > 1:
            _run_processes(tasks, jobs, finished)
        else:
            for i, task in enumerate(tasks):
                finished(i, _pack_one_star(task))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
        for i, row in enumerate(rows):
            if row is None:
                rows[i] = {"model": specs[i], "dir": ids[i], "status": "not started"}
        seconds = time.perf_counter() - t0
        totals = {k: sum(r["status"] == k for r in rows) for k in ("packed", "skipped", "error")}
        totals.update(not_started=sum(r["status"] == "not started" for r in rows), interrupted=interrupted,
                      layers=sum(r.get("packed", 0) for r in rows),
                      bytes_in=sum(r.get("bytes_in", 0) for r in rows),
                      bytes_out=sum(r.get("bytes_out", 0) for r in rows), seconds=round(seconds, 3))
        summary = {"options": opts, "models": rows, "totals": totals}
        write_atomic(out / "summary.json", (json.dumps(summary, indent=1) + "\n").encode())
        remove_stale_staging(out)  # also those of workers that died during this run
    if interrupted and on_result is None:
        raise KeyboardInterrupt
    return summary


def _bar(total: int, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="models", unit="model")


def _run_dask(client, tasks, finished) -> None:
    """Each model a task on the cluster; a task whose worker died (KilledWorker) or that raised
    is that model's error row."""
    from distributed import as_completed

    futures = client.map(_pack_one_star, tasks, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    try:
        for future in as_completed(futures):
            i = index[future.key]
            try:
                finished(i, future.result())
            except Exception as e:  # noqa: BLE001 - KilledWorker, a lost connection ...
                finished(i, _died(tasks[i], f"{type(e).__name__}: {e}"))
    except BaseException:
        client.cancel(futures)
        raise


def _died(task, reason: str) -> dict:
    return {"model": task[0], "dir": task[2], "status": "error", "reason": f"the worker packing it died ({reason})"}


def _run_processes(tasks, jobs: int, finished) -> None:
    """Each model in a worker process of its own, ``jobs`` at a time, so that a worker that dies
    (out of memory, killed) costs only its model."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    pending = list(range(len(tasks)))
    running: dict = {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                i = pending.pop(0)
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(send, tasks[i]), daemon=True)
                proc.start()
                send.close()
                running[proc.sentinel] = (i, proc, recv)
            for sentinel in wait(list(running)):
                i, proc, recv = running.pop(sentinel)
                row = None
                try:
                    if recv.poll():
                        row = recv.recv()
                except (EOFError, OSError):
                    row = None
                proc.join()
                recv.close()
                finished(i, row if row is not None else _died(tasks[i], f"exit code {proc.exitcode}"))
    except BaseException:
        for _, proc, _ in running.values():
            proc.terminate()  # SIGTERM: the worker cleans up its staging folder
        for _, proc, _ in running.values():
            proc.join()
        raise


def _child(conn, task) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    conn.send(_pack_one_star(task))
    conn.close()


def _pack_one_star(args):
    spec, out, model_id, force, opts = args
    return pack_one(spec, out, model_id, force=force, **opts)
