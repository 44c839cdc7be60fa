"""The repository stands on its own: every citation of the format reference in the code resolves to
a heading of docs/, and no file of the project reads or cites anything outside the repository.

A citation is ``docs/<page>.md``, optionally followed by ``§N.M`` (more numbers may follow, joined by
``,``, ``/``, ``-`` or ``and``: ``docs/nvdla.md §4.2, 4.4``); each number must start a heading of
that page (``### 4.2 Format table``). A page named without ``docs/`` in front is a citation
that no reader can follow and fails too."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCANNED = ("python", "cpp", "tests", "benchmarks", "fuzz", "examples")
SUFFIXES = {".py", ".pyi", ".cpp", ".hpp", ".h", ".inc", ".txt", ".toml", ".cfg"}
NUM = r"\d+(?:\.\d+)*"
CITATION = re.compile(r"docs/([\w-]+)\.md(?:\s*§\s*(" + NUM + r")((?:\s*(?:,|/|-|–|and)\s*" + NUM + r"(?![\w.]*\w))*))?")
BARE = re.compile(r"(?<![\w/])(nvdla|openvino|kneron|horizon|design|DESIGN)\.md\b")


def _files():
    out = []
    for top in SCANNED:
        out += [p for p in (ROOT / top).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return sorted(out + [ROOT / "CMakeLists.txt"])


def _sections(page):
    """The section numbers that start a heading of docs/<page>.md: '## 12. SDP' -> '12'."""
    path = DOCS / f"{page}.md"
    if not path.is_file():
        return None
    heads = re.findall(r"^#{1,6}\s+(" + NUM + r")\.?\s", path.read_text(encoding="utf-8"), re.M)
    return set(heads)


def test_every_citation_names_a_heading_of_docs():
    pages, bad, count = {}, [], 0
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in CITATION.finditer(text):
            count += 1
            page = m.group(1)
            if page not in pages:
                pages[page] = _sections(page)
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            if pages[page] is None:
                bad.append(f"{where}: no page docs/{page}.md")
                continue
            numbers = [m.group(2)] + re.findall(NUM, m.group(3) or "") if m.group(2) else []
            bad += [f"{where}: docs/{page}.md has no section {n}" for n in numbers if n not in pages[page]]
        for m in BARE.finditer(text):
            if text[max(0, m.start() - 5):m.start()] != "docs/":
                bad.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: "
                           f"'{m.group(0)}' cites no page of docs/ (write docs/{m.group(1).lower()}.md §N)")
    assert count > 300, count  # the code cites the reference throughout; a broken regex finds none
    assert not bad, "\n".join(bad)


def test_citation_checker_reads_the_forms_the_code_uses():
    assert CITATION.search("x (docs/nvdla.md §4.2, 4.4)").group(3).strip() == ", 4.4"
    assert CITATION.search("(docs/nvdla.md §9.6.)").group(2) == "9.6"
    assert CITATION.search("docs/kneron.md §7, item 5").group(3) == ""
    assert CITATION.search("docs/nvdla.md §13.1-13.3").group(3) == "-13.3"
    assert BARE.search("see nvdla" + ".md 12.2") and not BARE.search("see docs/nvdla.md §1")


SKIPPED_DIRS = {".git", "build", "site", "out", "__pycache__", ".hypothesis", ".pytest_cache", ".benchmarks"}


def test_no_file_reads_or_cites_outside_the_repository():
    """No file of the project names the background folder that sat beside the repository while it
    was written: a user's checkout does not have it."""
    outside = "shared" + "/"
    hits = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIPPED_DIRS or part.startswith(".venv") or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and path.suffix not in {".png", ".npz", ".bin", ".onnx", ".so"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            hits += [f"{rel}:{i + 1}" for i, line in enumerate(text.splitlines()) if outside in line]
    assert not hits, hits
