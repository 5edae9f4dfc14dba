"""RocksDB metadata survives kill -9 of the writing process.

A writer subprocess puts keys (and CAS-updates a counter) in a loop and prints
each key only after ``put`` returned; we SIGKILL it mid-stream, reopen the
database, and every acknowledged write must be there.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from magnetar.metadata.factory import create_metadata_store
    from magnetar.runtime import RealClock

    async def main(path):
        s = await create_metadata_store("rocksdb:" + path, clock=RealClock())
        await s.put("/writer/alive", b"", ephemeral=True)
        version = None
        i = 0
        while True:
            await s.put(f"/acked/k{i:06d}", str(i).encode())
            st = await s.put("/counter", str(i).encode(), version)
            version = st.version
            print(i, flush=True)
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


def test_acknowledged_writes_survive_kill_9(tmp_path) -> None:
    db = str(tmp_path / "meta")
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, db], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    acked: list[int] = []
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        while len(acked) < 150 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(int(line))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        # Lines already written to the pipe before the kill are acknowledged too.
        rest, err = proc.communicate(timeout=30)
    acked += [int(x) for x in rest.split()]
    assert proc.returncode == -signal.SIGKILL
    assert len(acked) >= 150, f"writer acknowledged only {len(acked)} puts; stderr: {err[-2000:]}"

    asyncio.run(_verify(db, acked))


async def _verify(db: str, acked: list[int]) -> None:
    s = await create_metadata_store("rocksdb:" + db, clock=RealClock())
    try:
        keys = await s.children("/acked")
        present = {int(k[1:]) for k in keys}
        missing = [i for i in acked if i not in present]
        assert not missing, f"acknowledged but lost: {missing[:10]}"
        counter = await s.get("/counter")
        assert counter is not None and int(counter.value) >= acked[-1]
        assert await s.exists("/writer/alive") is None, "the dead writer's ephemeral node is gone"
    finally:
        await s.aclose()
