"""The per-session ring buffer as a pure object: caps by count, age and
bytes, churn evicted first, and every loss visible to the window it hits."""

import reticle


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def ev(clock, etype, **data):
    return {"t": clock.now, "type": etype, "data": data}


def add_ticks(store, clock, etype, count, size=10):
    """Add `count` events of `etype` with data n = 0, 1, ..., one ms apart, `size` bytes each."""
    for i in range(count):
        clock.now += 1
        store.add(ev(clock, etype, n=i), size)


def test_churn_is_evicted_before_anything_else():
    clock = Clock()
    store = reticle._EventStore(clock, cap_count=10)
    store.add(ev(clock, "net.request", url="/a"), 10)
    add_ticks(store, clock, "dom.added", 20)
    clock.now += 1
    store.add(ev(clock, "signal", name="done"), 10)
    kinds = [e["type"] for e in store.query()]
    assert len(store) == 10
    assert kinds[0] == "net.request" and kinds[-1] == "signal"
    assert store.evicted == {"churn": 12, "other": 0}
    assert store.loss_since(0.0) == {"evictedChurn": 12}


def test_valuable_events_go_only_when_no_churn_is_left():
    clock = Clock()
    store = reticle._EventStore(clock, cap_count=3)
    add_ticks(store, clock, "net.request", 5)
    assert [e["data"]["n"] for e in store.query()] == [2, 3, 4]
    assert store.evicted["other"] == 2
    loss = store.loss_since(0.0)
    assert loss["evicted"] == 2
    assert store.loss_since(2.5) is None, "a window after the evicted events lost nothing"


def test_age_cap():
    clock = Clock()
    store = reticle._EventStore(clock, cap_age_ms=1000)
    store.add(ev(clock, "signal", n=1), 10)
    clock.now = 1500
    store.add(ev(clock, "signal", n=2), 10)
    assert [e["data"]["n"] for e in store.query()] == [2]
    assert store.loss_since(0.0) == {"evicted": 1}


def test_byte_cap():
    clock = Clock()
    store = reticle._EventStore(clock, cap_bytes=1000)
    add_ticks(store, clock, "console.log", 10, size=300)
    assert store.bytes <= 1000 and len(store) == 3


def test_query_window_and_prefix_keep_arrival_order():
    clock = Clock()
    store = reticle._EventStore(clock)
    for i, etype in enumerate(["dom.added", "net.pending", "dom.text", "net.request", "signal"]):
        clock.now = float(i * 10)
        store.add(ev(clock, etype, i=i), 10)
    assert [e["type"] for e in store.query(10, 30)] == ["net.pending", "dom.text", "net.request"]
    assert [e["type"] for e in store.query(prefix="net.")] == ["net.pending", "net.request"]
    assert [e["seq"] for e in store.query()] == [1, 2, 3, 4, 5]


def test_sampling_is_a_loss_too():
    clock = Clock()
    store = reticle._EventStore(clock)
    clock.now = 50
    store.note_sampled(7, clock.now)
    assert store.loss_since(10) == {"sampled": 7}
    assert store.loss_since(60) is None
    assert store.stats()["sampled"] == 7


def test_a_frame_may_overshoot_until_it_is_trimmed_once():
    clock = Clock()
    store = reticle._EventStore(clock, cap_count=5)
    for i in range(8):
        store.add(ev(clock, "signal", n=i), 10, trim=False)
    assert len(store) == 8
    store.trim(clock.now)
    assert [e["data"]["n"] for e in store.query()] == [3, 4, 5, 6, 7]
    assert store.evicted["other"] == 3


def test_a_frame_stored_at_once_keeps_and_evicts_what_one_by_one_would():
    """add_batch + one trim per frame (the frame path) against add one event at a time: the same events
    kept in the same order with the same seqs, the same evictions counted up to the same cursors."""
    import random
    class OneByOne(reticle._EventStore):
        def trim(self, now):  # the caps applied one eviction at a time, as the frame path used to
            horizon = now - self.cap_age_ms
            for dq, which in ((self._churn, "churn"), (self._kept, "other")):
                while dq and dq[0][0]["t"] < horizon:
                    self._evict(dq, which)
            over = len(self) - self.cap_count
            while over > 0 or self.bytes > self.cap_bytes:
                if self._churn:
                    self._evict(self._churn, "churn")
                elif self._kept:
                    self._evict(self._kept, "other")
                else:
                    break
                over -= 1

    rng = random.Random(22)
    one, batch = Clock(), Clock()
    a = OneByOne(one, cap_count=300, cap_age_ms=5000, cap_bytes=40000)
    b = reticle._EventStore(batch, cap_count=300, cap_age_ms=5000, cap_bytes=40000)
    types = ["dom.added", "net.request", "signal", "anim.start", "console.log", "page.health"]
    for frame in range(120):
        now = frame * 70.0
        one.now = batch.now = now
        size = rng.choice((10, 60, 150))
        # within a frame the cursors rise; a frame may start before the last one's cursors ended
        events = [{"t": now + rng.random() * 0.2 + i * 0.001, "type": rng.choice(types), "data": {"i": i}}
                  for i in range(rng.randint(1, 80))]
        sizes = [size + rng.choice((0, 0, 900)) for _ in events]  # each event counted by its own size
        for e, s in zip(events, sizes):
            a.add(dict(e), s, trim=False)
        a.trim(now)
        b.add_batch([(dict(e), s) for e, s in zip(events, sizes)])
        b.trim(now)
        assert (len(a), a.bytes, a.seq, a.total) == (len(b), b.bytes, b.seq, b.total)
        assert a.evicted == b.evicted and a.evicted_upto == b.evicted_upto
    assert a.evicted["churn"] and a.evicted["other"]
    assert [e["seq"] for e in a.query(0.0)] == [e["seq"] for e in b.query(0.0)]


def test_an_events_byte_count_in_one_pass_is_the_walks_own():
    """The frame path counts an event's bytes in one pass over the shapes most events have (an object of
    scalars, or of objects of scalars); anything else is walked.  Both give the same count for every shape,
    at the 400-value limit of the walk and past it."""
    import json
    import random
    rng = random.Random(22)

    def value(depth, budget):
        if depth > 2 or rng.random() < 0.4 + 0.2 * depth or budget[0] <= 0:
            budget[0] -= 1
            return rng.choice([rng.randint(-5, 5), rng.random(), True, False, None, "x" * rng.randint(0, 30)])
        n = rng.choice([0, 1, 3, 10, 150, 199, 200, 201])
        budget[0] -= n
        if rng.random() < 0.7:
            return {"k%d" % i * rng.randint(1, 3): value(depth + 1, budget) for i in range(n)}
        return [value(depth + 1, budget) for _ in range(n)]

    shapes = [{}, {"a": "x" * 900000}, {"name": "t", "data": {"n": 1, "tab": 2}}, {"a": [1, 2]}, None, 3, "s",
              [], {"a": {"b": {"c": 1}}}, {"k%d" % i: i for i in range(199)}, {"k%d" % i: i for i in range(200)},
              {"a": {"k%d" % i: "v" for i in range(198)}}, {"a": {"k%d" % i: "v" for i in range(199)}}, {1: "a"}, {"a": {2: "b"}}]
    shapes += [json.loads(json.dumps(value(0, [600]))) for _ in range(1500)]
    for data in shapes:
        assert reticle._event_bytes(data) == reticle._event_bytes_walk(data), json.dumps(data)[:200]
    assert reticle._event_bytes({"a": "x" * 900000}) > 900000
