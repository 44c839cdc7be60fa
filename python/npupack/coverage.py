"""What a pack run covered, from its manifest: layers counted by operator type and status,
SDP operands by status, and the exit status of the command line that follows from them.

Shared by ``npupack pack``, ``pack-many`` (one row per model) and ``verify`` (docs/design.md §5.8; the
manifest fields it reads: docs/manifest.md §3).
"""
from __future__ import annotations

__all__ = ["coverage", "exit_status", "combined_status", "describe", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_PARTIAL",
           "EXIT_INTERRUPTED"]

#: Everything the options ask for was packed (skipped operands that need --calibration aside).
EXIT_OK = 0
#: Something failed: a layer or operand with status "error", a model that could not be packed,
#: or (verify) a surface that is missing or changed.
EXIT_FAILED = 1
#: Bad arguments, an unreadable model or an output folder that is refused.
EXIT_USAGE = 2
#: Layers or operands left out as unsupported (no failure), without --allow-partial.
EXIT_PARTIAL = 3
#: Interrupted (Ctrl-C).
EXIT_INTERRUPTED = 130

_CALIBRATION = "--calibration"


def coverage(manifest: dict) -> dict:
    """Counts of a manifest: ``layers`` ({op_type: {status: n}}; entries without ``op_type``,
    from older manifests, count as "Conv"), ``layer_status`` ({status: n}), ``operands``
    ({"packed"/"skipped"/"error": n}), ``need_calibration`` (integer operands skipped for lack
    of a calibration table), and ``lines``: one ``(kind, text)`` per layer or operand not
    packed, kind "error", "unsupported" or "calibration"."""
    by_op: dict = {}
    status_n = {"packed": 0, "unsupported": 0, "error": 0}
    operands = {"packed": 0, "skipped": 0, "error": 0}
    lines, calibration = [], 0

    def operand(sdp, what):
        nonlocal calibration
        if not isinstance(sdp, dict):
            return
        st = sdp.get("status", "packed")
        if st not in operands:
            return
        operands[st] += 1
        reason = str(sdp.get("reason", ""))
        if st == "error":
            lines.append(("error", f"{what}: {reason}"))
        elif st == "skipped":
            if _CALIBRATION in reason:
                calibration += 1
                lines.append(("calibration", f"{what}: not packed: {reason}"))
            else:
                lines.append(("unsupported", f"{what}: not packed: {reason}"))

    for e in manifest.get("layers", []):
        op = e.get("op_type") or "Conv"
        st = e.get("status", "error")
        by_op.setdefault(op, {}).setdefault(st, 0)
        by_op[op][st] += 1
        status_n[st] = status_n.get(st, 0) + 1
        key = e.get("key", e.get("name"))
        if st == "error":
            lines.append(("error", f"layer {key}: {e.get('reason', '')}"))
        elif st != "packed":
            lines.append(("unsupported", f"layer {key}: {st}: {e.get('reason', '')}"))
        operand(e.get("sdp"), f"layer {key} SDP operand")
    for e in manifest.get("batchnorms", []):
        operand(e.get("sdp"), f"batch-norm {e.get('name')} SDP operand")
    return {"layers": by_op, "layer_status": status_n, "operands": operands, "need_calibration": calibration,
            "lines": lines}


def exit_status(cov: dict, allow_partial: bool) -> int:
    """EXIT_FAILED when anything failed, EXIT_PARTIAL when something was left out as unsupported
    (EXIT_OK with ``allow_partial``), else EXIT_OK."""
    kinds = {kind for kind, _ in cov["lines"]}
    if "error" in kinds:
        return EXIT_FAILED
    if "unsupported" in kinds and not allow_partial:
        return EXIT_PARTIAL
    return EXIT_OK


def combined_status(statuses) -> int:
    """The exit status of a run of several parts (models of pack-many): EXIT_FAILED when any part
    failed, whatever else was left out; then EXIT_PARTIAL; else EXIT_OK."""
    statuses = set(statuses)
    for status in (EXIT_FAILED, EXIT_PARTIAL):
        if status in statuses:
            return status
    return EXIT_OK


def describe(cov: dict) -> str:
    """``"Conv: 60 packed, 2 unsupported; Gemm: 1 packed; operands: 40 packed, 2 skipped"``."""
    parts = []
    for op, counts in cov["layers"].items():
        parts.append(f"{op}: " + ", ".join(f"{n} {'failed' if st == 'error' else st}" for st, n in counts.items()))
    ops = cov["operands"]
    parts.append("operands: " + ", ".join(f"{n} {'failed' if st == 'error' else st}" for st, n in ops.items()))
    return "; ".join(parts)
