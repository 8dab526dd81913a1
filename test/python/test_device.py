"""FeedLoader(device=...), the GPU-ready hand-off (issue 59): batches
copied from their shared-memory slots to the device, the next one ahead of
the loop, each slot held until its copy has completed. Against a real
`shardfeed serve` on a real MinIO. This machine has no GPU: the CUDA
backend (page-locked slots, a side stream) is checked on one by
hack/gpu/handoff.py; here the same loader runs with device="cpu" (copies
made at once) and with a backend whose copies complete when the test says,
which is what a DMA in flight looks like to the slots."""

import textwrap
import threading

import pytest
import torch

import shardfeed
from conftest import relay
from shardfeed._device import SyncBackend, ToDevice
from test_handoff import SLOTS, SPEC, STEPS, check, in_segment, kill_after_commit, table


@pytest.mark.parametrize("workers", [0, 2])
def test_device_batches_are_the_plans_and_their_slots_are_reclaimed(feed_factory, workers):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    client = shardfeed.Client(feed.socket)
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1), num_workers=workers,
                                  device="cpu", **relay(workers))
    steps, most = [], 0
    kept = []
    for batch in loader:
        steps.append(check(batch, plan))
        # Copies on the device: the slot they came from is the sidecar's again.
        assert not in_segment(batch["tokens"]) and batch["tokens"].device == torch.device("cpu")
        kept.append(batch)  # the loop may keep device batches: they hold no slot
        most = max(most, client.status()["handoff"]["segments"])
    assert steps == list(range(STEPS))
    assert [check(b, plan) for b in kept] == list(range(STEPS)), "a kept device batch changed"
    handoff = client.status()["handoff"]
    assert 0 < most <= SLOTS * max(workers, 1)
    # The loader held at most two slots a stream: never all of them, so
    # the sidecar never had to send a batch in the stream instead.
    assert handoff["inlineBatches"] == 0
    state = loader.state_dict()
    assert (state["epoch"], state["step"]) == (1, 0), "the epoch was read to its end: the next one is next"


class GatedBackend(SyncBackend):
    """Copies that complete when the test says: each start records the
    slot and generation of the batch it copies (the dataset's stream's
    placement just after the pull) and returns an event the test sets."""

    def __init__(self, ds):
        super().__init__("cpu")
        self.ds, self.copies = ds, []

    def start(self, batch):
        p = self.ds._stream.placement
        done = threading.Event()
        self.copies.append((p.slot, p.gen, done))
        out, _ = super().start(batch)
        return out, done

    def wait(self, event):
        assert event.wait(10), "waited for a copy that never completed"


def test_a_slot_is_held_until_its_copy_completes(feed_factory):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    backend = GatedBackend(ds)
    it = iter(ToDevice(iter(ds), backend))
    first = next(it)
    assert check(first, plan) == 0
    # Batch 1's copy started before batch 0 was handed out (one ahead).
    assert len(backend.copies) == 2
    (slot0, gen0, done0), (slot1, gen1, _) = backend.copies
    words = ds._stream.words
    del first  # the loop is done with the device batch; the DMA may not be
    assert int(words[slot0]) != gen0, "a slot went back while its copy could still read it"
    done0.set()
    backend.copies[1][2].set()
    second = next(it)  # waits for the copy handed out, then pulls batch 2
    assert check(second, plan) == 1
    assert int(words[slot0]) == gen0, "the slot of a completed copy was not released"
    assert int(words[slot1]) != gen1, "batch 1's slot went back before its copy was waited for"
    for _, _, done in backend.copies:
        done.set()
    rest = []
    for b in it:
        rest.append(check(b, plan))
        for _, _, done in backend.copies:
            done.set()
    assert [1] + rest == list(range(1, STEPS))


def test_a_device_loader_refuses_what_it_cannot_move(feed_factory):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    cases = [
        ({"device": "cpu", "pin_memory": True}, {}, "pin_memory"),
        ({"device": "not-a-device"}, {}, "not-a-device"),
        ({"device": "cpu"}, {"output": "numpy"}, "output='torch'"),
    ]
    for kwargs, ds_kwargs, says in cases:
        with pytest.raises((ValueError, RuntimeError), match=says):
            shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, **ds_kwargs), **kwargs)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1), device="cuda")


@pytest.mark.parametrize("workers", [0, 2])
def test_device_batches_through_a_sidecar_kill_are_exactly_once(feed_factory, workers):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0), num_workers=workers,
                                  device="cpu", **relay(workers))
    got = []
    restarted = threading.Event()
    for batch in loader:
        got.append(check(batch, plan))
        if len(got) == 5:
            # SIGKILL with a copy ahead of the loop and its slot held: the
            # sidecar comes back half a second later.
            feed.kill()
            threading.Timer(0.5, lambda: (feed.start(), restarted.set())).start()
    assert restarted.wait(30)
    assert got == list(range(STEPS))


TRAINER = textwrap.dedent("""
    import sys, time
    import shardfeed
    workers = int(sys.argv[2])
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(sys.argv[1], rank=0, world_size=1), num_workers=workers, device="cpu",
                                  **({"worker_init_fn": lambda _: None} if workers else {}))
    for batch in loader:
        if int(batch["_shardfeed_step"][0]) == 6:
            loader.commit()  # batch 7 is copied ahead already: it must not count
            print("committed", flush=True)
            time.sleep(600)
""")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_trainer_kill_with_batches_copied_ahead_resumes_exactly_once(feed_factory, workers):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    kill_after_commit(feed, TRAINER, workers)  # committed step 7: the batch copied ahead did not count
    rest = [check(b, plan) for b in shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1),
                                                         num_workers=workers, device="cpu", **relay(workers))]
    assert rest == list(range(7, STEPS))
