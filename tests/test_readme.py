"""The README's first lines and its Python example stay true."""
import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_starts_with_two_setup_commands():
    block = re.search(r"\A# npupack\n\n```sh\n(.*?)```", README, re.S)
    assert block, "README must open with the set-up block"
    commands = block.group(1).strip().splitlines()
    assert len(commands) == 2
    assert "npupack pack ppocr-det" in commands[0] and "pytest" in commands[1]


def test_readme_python_example_runs():
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
