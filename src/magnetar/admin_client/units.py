"""Pulsar's size and time shorthands, as ``pulsar-admin`` parses them.

Theory of operation: sizes are plain bytes or a number with ``k/K``, ``m/M``,
``g/G``, ``t/T`` (powers of 1024): ``4096``, ``100K``, ``10M``, ``16G``;
times are a number with ``s``, ``m``, ``h``, ``d``, ``w``, ``y`` (``100m``,
``13h``, ``2d``), and a bare number is in the caller's default unit (seconds
for TTLs).  ``-1`` means unlimited where Pulsar allows it and passes through
unchanged; any other negative or malformed value raises
:class:`InvalidArgument` with the offending text.
"""

from __future__ import annotations

import re

from magnetar.common.errors import InvalidArgument

_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_TIME_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]?)\s*$")


def parse_size(text: str | int, *, allow_unlimited: bool = True) -> int:
    """``10M`` -> 10485760 bytes; ``-1`` -> -1 when allowed."""
    if isinstance(text, int):
        value_int = text
        if value_int == -1 and allow_unlimited:
            return -1
        if value_int < 0:
            raise InvalidArgument(f"invalid size {text}: negative")
        return value_int
    s = str(text).strip()
    if s == "-1" and allow_unlimited:
        return -1
    m = _NUMBER.match(s)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InvalidArgument(f"invalid size '{text}': use bytes or a number with k, m, g or t (e.g. 10M)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


def parse_time_s(text: str | int, *, default_unit: str = "s", allow_unlimited: bool = True) -> int:
    """``1h`` -> 3600 seconds; a bare number is in ``default_unit``; ``-1`` -> -1 when allowed."""
    if isinstance(text, int):
        text = str(text)
    s = text.strip()
    if s == "-1" and allow_unlimited:
        return -1
    m = _NUMBER.match(s)
    if not m:
        raise InvalidArgument(f"invalid time '{text}': use a number with s, m, h, d, w or y (e.g. 3h)")
    unit = m.group(2) or default_unit
    if unit.lower() not in _TIME_UNITS_S:
        raise InvalidArgument(f"invalid time unit in '{text}': use s, m, h, d, w or y")
    return int(float(m.group(1)) * _TIME_UNITS_S[unit.lower()])


def parse_time_minutes(text: str | int, *, allow_unlimited: bool = True) -> int:
    """Retention time: ``3h`` -> 180 minutes (a bare number is seconds, as in pulsar-admin)."""
    seconds = parse_time_s(text, allow_unlimited=allow_unlimited)
    return -1 if seconds == -1 else seconds // 60
