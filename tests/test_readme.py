"""README.md opens with the two commands, and .ci/run runs exactly those (it reads them from README.md)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(the line before the fence, the block's content) for every fenced block."""
    return [(m.group(1), m.group(2).strip()) for m in re.finditer(r"([^\n]*)\n```[a-z]*\n(.*?)\n```", text, re.S)]


def test_readme_opens_with_the_run_command_then_the_test_command():
    # Given the README up to its first section
    opening = README.split("\n## ", 1)[0]
    blocks = _fenced_blocks(opening)
    # Then its first two code blocks are the two marked commands, one line each
    assert [marker for marker, _ in blocks[:2]] == ["<!-- run-command -->", "<!-- test-command -->"]
    run, test = blocks[0][1], blocks[1][1]
    assert "\n" not in run and "\n" not in test
    assert run.startswith("python3.11 -m venv .venv && ") and run.endswith("manage.py serve_embedded")
    assert test.startswith("python3.11 -m venv .venv && ") and test.endswith(".venv/bin/pytest")
    # and nothing but a title and a line of explanation comes before them
    before = opening.split("<!-- run-command -->", 1)[0]
    assert "```" not in before


def test_ci_runs_the_commands_written_in_the_readme():
    blocks = dict(_fenced_blocks(README))
    printed = subprocess.run([str(ROOT / ".ci" / "run"), "--print-commands"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.splitlines()
    assert printed == [blocks["<!-- run-command -->"], blocks["<!-- test-command -->"]]
