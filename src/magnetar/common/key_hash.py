"""Key hashes for partition routing, bit for bit as the official clients compute them.

Theory of operation: a keyed message goes to partition ``hash(key) % n``,
where ``hash`` is masked to 31 bits. Which hash depends on the client, so this
module has the three Pulsar names:

* ``BoostHash`` -- what the C++ library, hence the official *Python* client,
  uses by default: ``boost::hash<std::string>`` of Boost >= 1.81 on 64-bit
  (a multiply-xor ("mulx") hash over 8-byte little-endian words, with a
  special read of the 1..7-byte tail), masked to 31 bits. Verified against
  pulsar-client 3.x on a partitioned topic (tests/client/test_nc_interop.py).
* ``Murmur3_32Hash`` -- MurmurHash3 x86 32-bit, seed 0, sign bit masked
  (``common.murmur3.pulsar_hash``): Java's and Key_Shared's hash.
* ``JavaStringHash`` -- Java's ``String.hashCode`` over UTF-16 code units,
  masked: the Java client's default.
"""

from __future__ import annotations

from magnetar.common.murmur3 import pulsar_hash

_M64 = (1 << 64) - 1
_Q = 0x9E3779B97F4A7C15
_K = 0xDF442D22CE4859B9  # _Q * _Q mod 2**64


def _mulx(x: int, y: int) -> int:
    r = x * y
    return (r & _M64) ^ (r >> 64)


def boost_hash(key: str | bytes) -> int:
    """``boost::hash<std::string>`` (Boost >= 1.81, 64-bit) & INT32_MAX."""
    data = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    n = len(data)
    p = 0
    w = _mulx(_Q, _K)  # seed 0
    h = w ^ n
    while n >= 8:
        w = (w + _Q) & _M64
        h ^= _mulx((int.from_bytes(data[p : p + 8], "little") + w) & _M64, _K)
        p += 8
        n -= 8
    v = 0
    if n >= 4:
        v = (int.from_bytes(data[p + n - 4 : p + n], "little") << ((n - 4) * 8)) | int.from_bytes(
            data[p : p + 4], "little"
        )
    elif n >= 1:
        x1, x2 = (n - 1) & 2, n >> 1
        v = (data[p + x1] << (x1 * 8)) | (data[p + x2] << (x2 * 8)) | data[p]
    w = (w + _Q) & _M64
    h ^= _mulx((v + w) & _M64, _K)
    return _mulx((h + w) & _M64, _K) & 0x7FFFFFFF


def java_string_hash(key: str | bytes) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units) & INT32_MAX."""
    text = key.decode("utf-8") if isinstance(key, bytes) else key
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


def murmur3_hash(key: str | bytes) -> int:
    return pulsar_hash(key)
