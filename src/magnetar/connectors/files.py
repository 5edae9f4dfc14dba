"""File source and file sink.

Theory of operation: ``FileSource`` (config ``inputDirectory``, optional
``fileFilter`` regex, ``keepFile``) watches a directory: each file matching
the filter is read line by line, each line one record; a fully read file is
deleted (or, with ``keepFile``, remembered and left alone), so restarting the
source does not send it again.  ``FileSink`` (config ``outputFile``) appends
each record's value as one line and flushes and fsyncs before the write
returns, so an acknowledged input is on disk.
"""

from __future__ import annotations

import os
import re
from collections import deque
from pathlib import Path
from typing import Any

from magnetar.connectors.api import Record, Sink, Source, require

LINE_BYTES_MAX = 1024 * 1024


class FileSource(Source):
    def open(self, config: dict[str, Any], context: Any) -> None:
        self._dir = Path(str(require(config, "inputDirectory")))
        self._filter = re.compile(str(config.get("fileFilter") or r"[^.].*"))
        self._keep = str(config.get("keepFile", "false")).lower() == "true"
        self._done: set[str] = set()
        self._lines: deque[str] = deque()

    def _next_file(self) -> None:
        for path in sorted(self._dir.iterdir()) if self._dir.is_dir() else []:
            if not path.is_file() or not self._filter.fullmatch(path.name) or path.name in self._done:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                self._lines.extend(line.rstrip("\n")[:LINE_BYTES_MAX] for line in f)
            if self._keep:
                self._done.add(path.name)
            else:
                path.unlink()
            return

    def read(self) -> Any:
        if not self._lines:
            self._next_file()
        return self._lines.popleft() if self._lines else None


class FileSink(Sink):
    def open(self, config: dict[str, Any], context: Any) -> None:
        self._path = Path(str(require(config, "outputFile")))
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self._path, "ab")  # noqa: SIM115 -- closed in close()

    def write(self, record: Record) -> None:
        value = record.value
        data = value if isinstance(value, bytes) else str(value).encode()
        self._file.write(data + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()
