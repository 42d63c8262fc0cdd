"""Every Python example in docs/clients.md runs, against a real broker (the rmq_cluster fixture)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "clients.md").read_text(), re.S)


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_example_runs(code: str, rmq_cluster: Any, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {**os.environ, "NAMESRV_ADDR": rmq_cluster.namesrv_addr, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 4


def test_readme_and_docs_link_only_to_what_the_repository_holds() -> None:
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
