"""Protocol codec benchmark: prints figures, asserts nothing.

Measures, with 1 KB message payloads, single and batched (100 per entry):
- SEND encode (client side: metadata + batch + CRC32-C + frame),
- SEND decode (broker side: frame decode + CRC verify + metadata peek, no payload re-serialization),
- MESSAGE encode (broker dispatch: a new CommandMessage in front of the stored bytes),
- MESSAGE decode (client side: frame decode + CRC verify + metadata parse + batch split),
- the CRC32-C rate.

Run: .venv/bin/python benchmarks/protocol_bench.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from magnetar.protocol import commands
from magnetar.protocol.batch import SingleMessage, decode_batch, encode_batch
from magnetar.protocol.frames import FrameDecoder
from magnetar.protocol.payload import (
    build_headers_and_payload,
    crc32c,
    new_message_metadata,
    parse_headers_and_payload,
    peek_metadata,
    verify_checksum,
)

PAYLOAD_SIZE = 1024
BATCH = 100


def measure(fn: Callable[[], int], seconds: float) -> tuple[float, float]:
    """Run fn (returns the bytes it handled) repeatedly for ~seconds; return (calls/s, bytes/s)."""
    fn()  # warm-up
    calls = 0
    total = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        total += fn()
        calls += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    elapsed = now - start
    return calls / elapsed, total / elapsed


def report(name: str, frames_per_call: int, messages_per_frame: int, result: tuple[float, float]) -> None:
    calls_s, bytes_s = result
    frames_s = calls_s * frames_per_call
    print(
        f"{name:<44} {frames_s:>12,.0f} frames/s {frames_s * messages_per_frame:>12,.0f} msg/s "
        f"{bytes_s / 1e6:>9.1f} MB/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    secs = args.seconds
    body = os.urandom(PAYLOAD_SIZE)
    seq = [0]

    def single_hp() -> bytes:
        seq[0] += 1
        meta = new_message_metadata(
            producer_name="bench-producer", sequence_id=seq[0], publish_time=1_700_000_000_000
        )
        return build_headers_and_payload(meta, body)

    records = [SingleMessage(body, sequence_id=i) for i in range(BATCH)]

    def batch_hp() -> bytes:
        seq[0] += 1
        blob = encode_batch(records)
        meta = new_message_metadata(
            producer_name="bench-producer",
            sequence_id=seq[0],
            publish_time=1_700_000_000_000,
            num_messages_in_batch=BATCH,
        )
        return build_headers_and_payload(meta, blob)

    print(f"payload {PAYLOAD_SIZE} B per message, batches of {BATCH}, {secs:.1f} s per figure")

    # ---------------------------------------------------------------- SEND encode
    def enc_send_single() -> int:
        return len(commands.send(1, seq[0], single_hp()))

    def enc_send_batch() -> int:
        return len(commands.send(1, seq[0], batch_hp(), num_messages=BATCH))

    report("SEND encode, single (client)", 1, 1, measure(enc_send_single, secs))
    report("SEND encode, batch of 100 (client)", 1, BATCH, measure(enc_send_batch, secs))

    # ---------------------------------------------------------------- SEND decode
    n_single = 1000
    send_single_stream = b"".join(commands.send(1, i, single_hp()) for i in range(n_single))
    n_batch = 20
    send_batch_stream = b"".join(commands.send(1, i, batch_hp(), num_messages=BATCH) for i in range(n_batch))

    def dec_frames(stream: bytes, check: bool) -> Callable[[], int]:
        def run() -> int:
            decoder = FrameDecoder(6 * 1024 * 1024)
            decoder.feed(stream)
            while (frame := decoder.next_frame()) is not None:
                if check:
                    if not verify_checksum(frame.headers_and_payload):
                        raise AssertionError("checksum")
                    peek_metadata(frame.headers_and_payload)
            return len(stream)

        return run

    report(
        "SEND decode, single: frame only", n_single, 1, measure(dec_frames(send_single_stream, False), secs)
    )
    report(
        "SEND decode, single: + CRC + metadata (broker)",
        n_single,
        1,
        measure(dec_frames(send_single_stream, True), secs),
    )
    report(
        "SEND decode, batch: frame only", n_batch, BATCH, measure(dec_frames(send_batch_stream, False), secs)
    )
    report(
        "SEND decode, batch: + CRC + metadata (broker)",
        n_batch,
        BATCH,
        measure(dec_frames(send_batch_stream, True), secs),
    )

    # ---------------------------------------------------------------- MESSAGE encode
    stored_single = single_hp()
    stored_batch = batch_hp()
    entry = [0]

    def enc_msg(stored: bytes) -> Callable[[], int]:
        def run() -> int:
            entry[0] += 1
            return len(commands.message(3, 42, entry[0], -1, stored))

        return run

    report("MESSAGE encode, single (broker dispatch)", 1, 1, measure(enc_msg(stored_single), secs))
    report("MESSAGE encode, batch of 100 (broker)", 1, BATCH, measure(enc_msg(stored_batch), secs))

    # ---------------------------------------------------------------- MESSAGE decode
    msg_single_stream = b"".join(commands.message(3, 42, i, -1, stored_single) for i in range(n_single))
    msg_batch_stream = b"".join(commands.message(3, 42, i, -1, stored_batch) for i in range(n_batch))

    def dec_messages(stream: bytes) -> Callable[[], int]:
        def run() -> int:
            decoder = FrameDecoder(64 * 1024 * 1024)
            decoder.feed(stream)
            while (frame := decoder.next_frame()) is not None:
                parsed = parse_headers_and_payload(frame.headers_and_payload)
                if not parsed.checksum_ok:
                    raise AssertionError("checksum")
                meta = parsed.metadata
                if meta.HasField("num_messages_in_batch"):
                    decode_batch(parsed.payload, meta.num_messages_in_batch)
            return len(stream)

        return run

    report("MESSAGE decode, single (client)", n_single, 1, measure(dec_messages(msg_single_stream), secs))
    report(
        "MESSAGE decode, batch + split (client)",
        n_batch,
        BATCH,
        measure(dec_messages(msg_batch_stream), secs),
    )

    # ---------------------------------------------------------------- CRC32-C
    for size in (1024, 1024 * 1024):
        buf = os.urandom(size)

        def crc(buf: bytes = buf) -> int:
            crc32c(buf)
            return len(buf)

        calls_s, bytes_s = measure(crc, secs)
        print(f"{f'CRC32-C over {size} B buffers':<44} {calls_s:>12,.0f} calls/s {bytes_s / 1e6:>27.1f} MB/s")


if __name__ == "__main__":
    main()
