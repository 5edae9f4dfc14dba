"""MurmurHash3 x86 32 against published vectors and an independent formulation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magnetar.common.murmur3 import KEY_SHARED_RANGE_SIZE, NONE_KEY, murmur3_32, pulsar_hash, sticky_key_slot


def reference_murmur3_32(data: bytes, seed: int = 0) -> int:
    """A second, deliberately different formulation: arithmetic rotations, byte-at-a-time assembly."""
    mod = 2**32

    def rotl(x: int, r: int) -> int:
        return (x * 2**r) % mod + x // 2 ** (32 - r)

    def scramble(k: int) -> int:
        return (rotl((k * 0xCC9E2D51) % mod, 15) * 0x1B873593) % mod

    h = seed % mod
    full = len(data) - len(data) % 4
    for i in range(0, full, 4):
        k = sum(data[i + j] * 256**j for j in range(4))
        h ^= scramble(k)
        h = (rotl(h, 13) * 5 + 0xE6546B64) % mod
    rest = data[full:]
    if rest:
        h ^= scramble(sum(b * 256**j for j, b in enumerate(rest)))
    h ^= len(data)
    for shift, mult in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * mult) % mod
    return h ^ (h >> 16)


# Published MurmurHash3_x86_32 test vectors (SMHasher / widely reproduced lists).
VECTORS = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\x00\x00\x00", 0, 0x85F0B427),
    (b"\x00\x00", 0, 0x30F4C306),
    (b"\x00", 0, 0x514E28B7),
    (b"hello", 0, 0x248BFA47),
    (b"Hello, world!", 1234, 0xFAF6CDB3),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"abc", 0x9747B28C, 0xC84A62DD),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]


@pytest.mark.parametrize(("data", "seed", "expected"), VECTORS)
def test_published_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected
    assert reference_murmur3_32(data, seed) == expected


@given(st.binary(max_size=64), st.integers(0, 2**32 - 1))
def test_agrees_with_independent_formulation(data: bytes, seed: int) -> None:
    assert murmur3_32(data, seed) == reference_murmur3_32(data, seed)


def test_str_is_hashed_as_utf8_and_views_work() -> None:
    assert murmur3_32("héllo") == murmur3_32("héllo".encode())
    assert murmur3_32(memoryview(b"xhello")[1:]) == 0x248BFA47
    assert murmur3_32(bytearray(b"hello")) == 0x248BFA47


def test_pulsar_hash_masks_the_sign_bit() -> None:
    values = [murmur3_32(bytes([i])) for i in range(256)]
    negative = [i for i, v in enumerate(values) if v & 0x80000000]
    assert negative, "some one-byte keys hash with the top bit set"
    for i in negative:
        assert pulsar_hash(bytes([i])) == values[i] - 0x80000000


def test_sticky_key_slots() -> None:
    for key in [NONE_KEY, b"key-1", "order-42"]:
        slot = sticky_key_slot(key)
        assert 1 <= slot < KEY_SHARED_RANGE_SIZE
        assert slot == pulsar_hash(key) % KEY_SHARED_RANGE_SIZE or slot == 1


def test_slot_zero_rule() -> None:
    # find a key whose slot is 0 and check both rules
    key = next(k for k in (str(i).encode() for i in range(1_000_000)) if pulsar_hash(k) % 65536 == 0)
    assert sticky_key_slot(key) == 1
    assert sticky_key_slot(key, avoid_zero_slot=False) == 0
