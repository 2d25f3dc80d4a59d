"""docs/cli.md documents every command of `trainprof --help` exactly once (a heading naming
`trainprof <command>`), and no planned command is described as missing once it exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import trainprof_command

REPO = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    out = subprocess.run([*trainprof_command(), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    section = out.split("SUBCOMMANDS:", 1)[1] if "SUBCOMMANDS:" in out else out
    names = re.findall(r"^\s{2}(\w[\w-]*)\s", section, flags=re.M)
    assert len(names) >= 10, out
    return names


def test_every_command_is_documented_once():
    doc = (REPO / "docs" / "cli.md").read_text()
    headings = [h for h in re.findall(r"^## (.+)$", doc, flags=re.M)]
    for name in _commands():
        if "not implemented yet" in subprocess.run([*trainprof_command(), name, "--help"],
                                                   capture_output=True, text=True).stdout:
            assert f"`{name}`" in doc.split("## Planned", 1)[-1], name  # listed as planned
            continue
        pattern = re.compile(rf"trainprof {name}\b")
        hits = [h for h in headings if pattern.search(h)]
        if name in ("export", "import"):
            assert hits, (name, headings)
            continue
        assert len(hits) == 1, (name, hits)
