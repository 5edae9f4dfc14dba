"""Data-generator source: made-up person records, as Pulsar's data-generator connector produces.

Theory of operation: each ``read`` returns the next JSON person
``{"id", "firstName", "lastName", "age", "email"}`` drawn from a seeded
``random.Random`` (config ``seed``, default 0: the same run gives the same
records), sleeping ``sleepBetweenMessages`` ms (Pulsar's key, default 50)
between records; ``maxMessages`` (default unlimited) ends the stream.
"""

from __future__ import annotations

import random
import time
from typing import Any

from magnetar.connectors.api import Source

FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken")
LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson")


class DataGeneratorSource(Source):
    def open(self, config: dict[str, Any], context: Any) -> None:
        self._rng = random.Random(int(config.get("seed", 0)))
        self._sleep_s = int(config.get("sleepBetweenMessages", 50)) / 1000
        self._max = int(config.get("maxMessages", 0)) or None
        self._n = 0

    def read(self) -> Any:
        if self._max is not None and self._n >= self._max:
            time.sleep(0.1)
            return None
        if self._sleep_s:
            time.sleep(self._sleep_s)
        self._n += 1
        first, last = self._rng.choice(FIRST), self._rng.choice(LAST)
        return {
            "id": self._n,
            "firstName": first,
            "lastName": last,
            "age": self._rng.randint(18, 90),
            "email": f"{first}.{last}{self._n}@example.com".lower(),
        }
