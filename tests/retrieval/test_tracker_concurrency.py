"""The in-process action memory under concurrent lookups (FS-3): its lock is what keeps marks.

Many threads calling ``mark_many`` prove nothing by themselves: under the GIL a thread is rarely
switched out between reading the session table and writing it. These tests force that switch:
the session table is replaced by a dict whose reads wait until a second thread has read too, so
without the lock both threads see "no session yet" before either creates one.
"""

from __future__ import annotations

import contextlib
import threading

from retrieval.agents.tracker import MemoryTracker


class _ReadsMeetHere(dict):
    """A session table whose ``get`` waits (briefly) for a second reader before answering.

    With the tracker's lock, the second reader cannot arrive while the first holds the lock, so
    the wait times out and the calls run one after the other, as they should. Without it, both
    threads read the same "before" state, and the interleaving a busy server produces now and
    then happens every time.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.barrier = threading.Barrier(2, timeout=0.5)

    def get(self, key, default=None):
        value = super().get(key, default)
        with contextlib.suppress(threading.BrokenBarrierError):  # timed out: no second reader
            self.barrier.wait()
        return value


def _in_two_threads(first, second) -> None:
    errors: list[BaseException] = []

    def run(call):
        try:
            call()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "a thread never finished"
    assert not errors, errors


def test_two_first_marks_of_one_new_session_at_once_both_stay():
    # Given a new session that two lookups mark at the same moment (an agent's parallel tool calls)
    tracker = MemoryTracker(ttl=3600)
    tracker._sessions = _ReadsMeetHere()

    # When each marks its own document
    _in_two_threads(
        lambda: tracker.mark_many("s1", [("infrastructure", "a.md")]),
        lambda: tracker.mark_many("s1", [("api", "b.md")]),
    )

    # Then the session holds both: neither lookup's session replaced the other's
    assert tracker.snapshot("s1").doc_keys == {"a.md", "b.md"}
    assert set(tracker.get_retrieved_domains("s1")) == {"infrastructure", "api"}
    assert tracker.session_count() == 1
