"""Hand-built events for the pure verdict tests (tests/test_rules.py, tests/test_judge.py): the
shape the bridge stores, without a browser."""


def ev(t, etype, **data):
    """One stored event at time `t` (ms), its sequence number `t`."""
    return {"t": float(t), "seq": int(t), "type": etype, "data": data}


def call(t, method="POST", url="/api/save", status=200, body='{"ok": true}', **extra):
    """A finished fetch/XHR call as the SDK reports it (`body=None`: no body captured)."""
    d = dict(method=method, url=url, status=status, ok=status < 400, requestId="r%d" % t, **extra)
    if body is not None:
        d["responseBody"] = body
    return ev(t, "net.request", **d)
