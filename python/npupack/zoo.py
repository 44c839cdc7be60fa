"""Real models npupack knows how to fetch: ONNX files shipped inside pinned PyPI wheels.

``fetch_model(name)`` downloads the one wheel with pip (no dependencies), extracts the model
into the cache directory (``$NPUPACK_CACHE`` or ``~/.cache/npupack``), and verifies its sha256.
A cached file with the right checksum is used as is.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from npupack.files import sha256_file

__all__ = ["ModelSource", "MODELS", "cache_dir", "fetch_model", "resolve_model"]


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: ``wheel`` (a pinned requirement), the ``member`` path inside
    it, the sha256 of the extracted file, and its licence."""

    wheel: str
    member: str
    sha256: str
    license: str


_RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
_DDDDOCR = "ddddocr==1.6.1"
MODELS = {
    "ppocr-det": ModelSource(_RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                             "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", "Apache-2.0"),
    "ppocr-rec": ModelSource(_RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                             "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", "Apache-2.0"),
    "ppocr-cls": ModelSource(_RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                             "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", "Apache-2.0"),
    "ddddocr-ocr": ModelSource(_DDDDOCR, "ddddocr/common.onnx",
                               "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", "MIT"),
    "ddddocr-old": ModelSource(_DDDDOCR, "ddddocr/common_old.onnx",
                               "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68", "MIT"),
    "ddddocr-det": ModelSource(_DDDDOCR, "ddddocr/common_det.onnx",
                               "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6", "MIT"),
}


def cache_dir() -> Path:
    """The model cache: ``$NPUPACK_CACHE`` if set, else ``~/.cache/npupack``."""
    return Path(os.environ.get("NPUPACK_CACHE") or Path.home() / ".cache" / "npupack")


def fetch_model(name: str, *, cache: Path | None = None, quiet: bool = True) -> Path:
    """Return the local path of model ``name`` (a key of ``MODELS``), fetching it if needed.

    Raises
    ------
    ValueError
        Unknown name.
    RuntimeError
        pip could not download the wheel, the member is missing, or the sha256 differs.
    """
    if name not in MODELS:
        raise ValueError(f"name: unknown model {name!r}; known: {sorted(MODELS)}")
    src = MODELS[name]
    root = Path(cache) if cache is not None else cache_dir()
    target = root / "models" / Path(src.member).name
    if target.is_file() and sha256_file(target) == src.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp, src.wheel]
        if quiet:
            cmd.insert(4, "-q")
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"could not download {src.wheel} with pip:\n{done.stdout}")
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise RuntimeError(f"pip downloaded no wheel for {src.wheel}")
        extracted = Path(tmp) / "model.onnx"
        with zipfile.ZipFile(wheels[0]) as zf:
            try:
                with zf.open(src.member) as fin, open(extracted, "wb") as fout:
                    while chunk := fin.read(1 << 20):
                        fout.write(chunk)
            except KeyError:
                raise RuntimeError(f"{src.member} is not in {wheels[0].name}") from None
        digest = sha256_file(extracted)
        if digest != src.sha256:
            raise RuntimeError(f"{src.member}: sha256 {digest} does not match the pinned {src.sha256}")
        os.replace(extracted, target)
    return target


def resolve_model(spec: str) -> Path:
    """A model argument of the command line: a path to an ``.onnx`` file, or a ``MODELS`` name
    (fetched on first use)."""
    if spec in MODELS and not Path(spec).exists():
        return fetch_model(spec)
    return Path(spec)
