"""Seeded randomness.

Theory of operation: one :class:`Rng` is created per process (or per
simulation) from a seed and handed down.  Components that need their own
stream call :meth:`Rng.fork` with a stable label, so adding randomness in one
component does not shift another's sequence -- which keeps simulation seeds
replayable as code evolves.  Never iterate a set of strings to make a random
choice in simulated code: string hashing differs per process.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Rng:
    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "big")
        self.seed = seed
        self._r = random.Random(seed)

    def fork(self, label: str) -> Rng:
        digest = hashlib.blake2b(f"{self.seed}:{label}".encode(), digest_size=8).digest()
        return Rng(int.from_bytes(digest, "big"))

    def random(self) -> float:
        return self._r.random()

    def randint(self, a: int, b: int) -> int:
        return self._r.randint(a, b)

    def uniform(self, a: float, b: float) -> float:
        return self._r.uniform(a, b)

    def choice(self, seq: Sequence[T]) -> T:
        return self._r.choice(seq)

    def sample(self, seq: Sequence[T], k: int) -> list[T]:
        return self._r.sample(list(seq), k)

    def shuffle(self, items: list[T]) -> None:
        self._r.shuffle(items)

    def randbytes(self, n: int) -> bytes:
        return self._r.randbytes(n)

    def chance(self, probability: float) -> bool:
        return self._r.random() < probability

    def hex(self, n_chars: int) -> str:
        return self.randbytes((n_chars + 1) // 2).hex()[:n_chars]
