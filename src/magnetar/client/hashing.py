"""Key hashes for partition routing: they live in ``magnetar.common.key_hash`` (the WebSocket
producer routes with them too, without importing the client)."""

from magnetar.common.key_hash import boost_hash, java_string_hash, murmur3_hash

__all__ = ["boost_hash", "java_string_hash", "murmur3_hash"]
