"""BookieConfig: BookKeeper key names from a key=value file, typed and frozen."""

from __future__ import annotations

import dataclasses

import pytest

from magnetar.bookie.config import BookieConfig

TEXT = """
# bk_server.conf excerpt
bookiePort=3282
journalDirectory=/data/bk/journal
ledgerDirectories=/data/bk/l1, /data/bk/l2
journalSyncData=false
journalMaxGroupWaitMSec=5
diskUsageThreshold=0.9
gcWaitTime=60000
minorCompactionThreshold=0.25
majorCompactionThreshold=0.6
zkServers=zk1:2181
"""


def test_from_properties_maps_bk_keys_to_typed_fields():
    cfg = BookieConfig.from_properties(TEXT)
    assert cfg.bookie_port == 3282
    assert cfg.journal_directory == "/data/bk/journal"
    assert cfg.ledger_directories == ("/data/bk/l1", "/data/bk/l2")
    assert cfg.journal_sync_data is False
    assert cfg.journal_max_group_wait_ms == 5.0
    assert cfg.disk_usage_threshold == 0.9
    assert cfg.gc_wait_time_ms == 60000
    assert (cfg.minor_compaction_threshold, cfg.major_compaction_threshold) == (0.25, 0.6)
    assert cfg.unknown_keys() == ["zkServers"]
    assert cfg.effective_bookie_id == "127.0.0.1:3282"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.bookie_port = 1  # type: ignore[misc]


def test_defaults_are_bookkeepers():
    cfg = BookieConfig()
    assert cfg.journal_sync_data is True
    assert cfg.disk_usage_threshold == 0.95
    assert cfg.minor_compaction_threshold == 0.2 and cfg.major_compaction_threshold == 0.5


def test_bad_values_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="journalSyncData"):
        BookieConfig.from_properties("journalSyncData=maybe")
    with pytest.raises(ValueError, match="bookiePort"):
        BookieConfig.from_properties("bookiePort=eighty")
    path = tmp_path / "bk.conf"
    path.write_text("flushInterval=250\n")
    assert BookieConfig.from_file(str(path)).flush_interval_ms == 250
    assert BookieConfig().with_overrides(bookie_port=None, bookie_id="x").bookie_id == "x"
