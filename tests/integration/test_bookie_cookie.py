"""A bookie process started on another bookie's directories refuses to start (exit 3, clear error)."""

from __future__ import annotations

import asyncio
import sys

from bookie_proc import free_port, start_bookie


async def test_bookie_on_someone_elses_directories_refuses_to_start(tmp_path):
    data_dir = str(tmp_path / "bookie")
    meta = f"rocksdb:{tmp_path / 'meta'}"
    port = free_port()
    bk = await start_bookie(data_dir, port, meta)
    assert await bk.terminate() == 0
    other_port = free_port()  # another identity (bookie id = address:port) on the same directories
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "magnetar.cli.main", "bookie", "--data-dir", data_dir,
        "--port", str(other_port), "--metadata-url", meta,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 3
    assert b"ready" not in out
    assert f"belongs to bookie 127.0.0.1:{port}".encode() in err
    # the rightful owner still starts
    bk = await start_bookie(data_dir, port, meta)
    assert await bk.terminate() == 0
