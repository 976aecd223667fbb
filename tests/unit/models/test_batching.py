"""The micro-batcher with fake models: batches shared and cut, failures and cancellations kept to their callers,
the queue bounded, overall and per owner."""

from __future__ import annotations

import asyncio
import threading

import pytest
from answerbox.core.work_owner import work_owner
from answerbox.models.batching import MicroBatcher, QueueFull, partition


class Recorder:
    """A fake model: records each batch and the thread it ran on."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[str] = set()

    def __call__(self, items: list[str]) -> list[str]:
        self.batches.append(list(items))
        self.threads.add(threading.current_thread().name)
        return [item.upper() for item in items]


async def test_concurrent_callers_share_batches() -> None:
    model = Recorder()
    batcher: MicroBatcher[str, str] = MicroBatcher(model, max_batch=16, max_wait_s=0.05)
    results = await asyncio.gather(*(batcher.submit([f"q{i}"]) for i in range(16)))
    assert results == [[f"Q{i}"] for i in range(16)]
    assert len(model.batches) == 1
    assert len(model.batches[0]) == 16
    assert model.threads != {threading.current_thread().name}  # off the event loop
    batcher.close()


async def test_batches_respect_max_batch_and_are_sorted_by_length() -> None:
    model = Recorder()
    batcher: MicroBatcher[str, str] = MicroBatcher(model, max_batch=4, max_wait_s=0.05)
    items = ["aaaa", "a", "aaa", "aa", "aaaaa", "aaaaaa"]
    assert await batcher.submit(items) == [i.upper() for i in items]
    assert len(model.batches) == 2
    assert all(len(b) <= 4 for b in model.batches)
    assert [item for batch in model.batches for item in batch] == sorted(items, key=len)
    batcher.close()


def test_short_items_are_not_padded_to_long_ones() -> None:
    # A search's ten titles (a dozen tokens) and ten passages (~190): one batch of 16 would pad
    # six titles to 190 tokens; apart, each batch pads to its own length.
    lengths = [12] * 10 + [190] * 10
    assert partition(lengths, max_batch=16) == [range(0, 10), range(10, 20)]


def test_similar_items_share_one_batch_up_to_max_batch() -> None:
    assert partition([100, 101, 102, 104], max_batch=16) == [range(0, 4)]
    batches = partition([50] * 20, max_batch=16)
    assert len(batches) == 2
    assert all(len(b) <= 16 for b in batches)
    assert [i for b in batches for i in b] == list(range(20))
    assert partition([], max_batch=4) == []


async def test_a_lone_caller_waits_at_most_max_wait() -> None:
    model = Recorder()
    batcher: MicroBatcher[str, str] = MicroBatcher(model, max_batch=64, max_wait_s=0.01)
    assert await asyncio.wait_for(batcher.submit(["x"]), timeout=1) == ["X"]
    batcher.close()


async def test_model_errors_reach_every_caller_in_the_batch() -> None:
    def broken(items: list[str]) -> list[str]:
        raise RuntimeError("boom")

    batcher: MicroBatcher[str, str] = MicroBatcher(broken, max_batch=8, max_wait_s=0.01)
    results = await asyncio.gather(batcher.submit(["a"]), batcher.submit(["b"]), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    # The worker survives a failed batch.
    batcher._run_batch = Recorder()  # swap the model behind the same worker
    assert await batcher.submit(["c"]) == ["C"]
    batcher.close()


async def test_a_cancelled_caller_does_not_break_the_others() -> None:
    model = Recorder()
    batcher: MicroBatcher[str, str] = MicroBatcher(model, max_batch=8, max_wait_s=0.05)
    doomed = asyncio.ensure_future(batcher.submit(["gone"]))
    kept = asyncio.ensure_future(batcher.submit(["kept"]))
    await asyncio.sleep(0)
    doomed.cancel()
    assert await kept == ["KEPT"]
    with pytest.raises(asyncio.CancelledError):
        await doomed
    batcher.close()


async def test_work_for_callers_who_gave_up_is_not_done() -> None:
    started = threading.Event()
    release = threading.Event()
    seen: list[list[str]] = []

    def slow(items: list[str]) -> list[str]:
        seen.append(list(items))
        started.set()
        release.wait(5)
        return [item.upper() for item in items]

    batcher: MicroBatcher[str, str] = MicroBatcher(slow, max_batch=1, max_wait_s=0)
    first = asyncio.ensure_future(batcher.submit(["a"]))
    later = asyncio.ensure_future(batcher.submit(["b", "c"]))  # same round, later batches
    await asyncio.to_thread(started.wait, 5)
    later.cancel()  # its caller timed out while "a" ran
    release.set()
    assert await first == ["A"]
    with pytest.raises(asyncio.CancelledError):
        await later
    assert seen == [["a"]]
    batcher.close()


async def test_a_full_queue_refuses_at_once() -> None:
    started = threading.Event()
    release = threading.Event()

    def held(items: list[str]) -> list[str]:
        started.set()
        release.wait(5)
        return [i.upper() for i in items]

    batcher: MicroBatcher[str, str] = MicroBatcher(held, max_batch=2, max_wait_s=0, max_pending=3)
    running = asyncio.ensure_future(batcher.submit(["a", "b"]))
    await asyncio.to_thread(started.wait, 5)  # the worker took a and b
    queued = asyncio.ensure_future(batcher.submit(["c", "d", "e"]))
    await asyncio.sleep(0)
    with pytest.raises(QueueFull):
        await batcher.submit(["f"])
    release.set()
    assert await running == ["A", "B"]
    assert await queued == ["C", "D", "E"]
    batcher.close()


async def test_one_owner_cannot_fill_the_queue_that_others_need() -> None:
    gate = threading.Event()

    def slow(items: list[str]) -> list[str]:
        gate.wait(5)
        return [item.upper() for item in items]

    batcher: MicroBatcher[str, str] = MicroBatcher(slow, max_batch=4, max_wait_s=0.0, max_pending=16)

    async def as_owner(owner: str, items: list[str]) -> list[str]:
        work_owner.set(owner)  # a task's own context: as a search's admission sets it
        return await batcher.submit(items)

    flood = asyncio.create_task(as_owner("flooder", [f"f{i}" for i in range(4)]))
    await asyncio.sleep(0)  # the flood's submit runs up to its wait
    with pytest.raises(QueueFull, match="this caller"):
        await as_owner("flooder", ["one more"])
    other = asyncio.create_task(as_owner("other", ["o1", "o2"]))
    gate.set()
    assert await other == ["O1", "O2"]
    assert len(await flood) == 4
    batcher.close()
