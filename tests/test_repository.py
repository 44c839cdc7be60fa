"""The shape of the C++ tree (docs/design.md §3.12, §4.9): small files with one job each, the
engine split into plan, strategies and runners, the kernels one per file under cpp/kernels/ and
all of them in the one list that drives dispatch."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400


def test_no_cpp_file_is_a_monolith():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
             for p in (ROOT / "cpp").rglob("*") if p.is_file()}
    assert sizes, "no C++ sources found"
    big = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not big, f"files over {MAX_LINES} lines: {big}"


def test_every_kernel_file_is_in_the_list():
    kernels = ROOT / "cpp" / "kernels"
    listed = set(re.findall(r'"([a-z0-9_-]+)"', (kernels / "kernels.def").read_text()))
    # Kernel files are named <operation>_<element>_<tile>_<isa> (docs/design.md §4.9); the rest
    # of the folder is the list, its reader and shared headers.
    files = {p.stem for p in kernels.glob("*.cpp") if re.fullmatch(r"[a-z0-9-]+_x\d+(x\d+)?_[0-9a-z]+_[a-z0-9]+", p.stem)}
    assert len(files) >= 30, sorted(files)
    assert files <= listed, f"kernel files missing from kernels.def: {sorted(files - listed)}"
