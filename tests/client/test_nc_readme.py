"""The README's asyncio example runs as printed (against the test standalone)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_asyncio_example_runs(standalone):
    text = README.read_text(encoding="utf-8")
    code = re.search(r"### The asyncio client.*?```python\n(.*?)```", text, re.S).group(1)
    code = code.replace("pulsar://localhost:6650", standalone.broker_url)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("b'hello' {'a': '1'} k (")
    assert lines[1:] == ["b'hello'"] + [f"b'm{i}'" for i in range(100)]
