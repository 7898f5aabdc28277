"""The lookup's per-process caches: a segmented LRU that a flood of one-off queries cannot empty.

Agents share the query-vector and search-hit caches (``retrieval.lookup.vector_search``). With a
plain LRU, one agent asking about a thousand new questions evicts what every other agent asks
again. Here a key enters a probation segment and moves to a protected one (at most
``PROTECTED_SHARE`` of the capacity) only when it is asked again: new keys evict new keys, and
what was asked twice stays until other keys asked twice push it out. (An agent repeating each of
its thousand questions can still churn the protected segment; its budget bounds how fast.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

PROTECTED_SHARE = 0.8


class LRUCache:
    """A small thread-safe segmented LRU map (see the module docstring)."""

    def __init__(self) -> None:
        self._probation: OrderedDict = OrderedDict()
        self._protected: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = 0

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key in self._protected:
                self._protected.move_to_end(key)
                return self._protected[key]
            if key not in self._probation:
                return None
            value = self._probation.pop(key)  # asked again: protected
            self._protected[key] = value
            limit = int(self._capacity * PROTECTED_SHARE)
            while len(self._protected) > max(limit, 1):
                demoted, old = self._protected.popitem(last=False)
                self._probation[demoted] = old  # back on probation, as the most recent there
            return value

    def put(self, key: Hashable, value: Any, *, capacity: int) -> None:
        if capacity <= 0:
            return
        with self._lock:
            self._capacity = capacity
            if key in self._protected:
                self._protected[key] = value
                self._protected.move_to_end(key)
            else:
                self._probation[key] = value
                self._probation.move_to_end(key)
            while len(self._probation) + len(self._protected) > capacity:
                if self._probation:
                    self._probation.popitem(last=False)
                else:
                    self._protected.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._probation.clear()
            self._protected.clear()

    def __len__(self) -> int:
        return len(self._probation) + len(self._protected)
