"""Run as `python tests/_profiled_app.py KIND`: a Flask app with Reticle's middleware that opens a raw
sqlite3 connection per request (the Flask tutorial's shape), under one kind of tool that uses the
interpreter's own hooks, each request through Werkzeug's test client.  Prints one JSON line: the
statuses, whether the tool still ran and was left as found, and whether the connections were watched.

KIND: cprofile (Werkzeug's ProfilerMiddleware, cProfile under it), profile-function (a Python-level
sys.setprofile function), trace-function (a debugger-style sys.settrace function) or none."""

import io
import json
import os
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flask  # noqa: E402

import reticle  # noqa: E402

kind = sys.argv[1]
db = os.path.join(tempfile.mkdtemp(), "notes.sqlite3")
app = flask.Flask("notes")


@app.get("/")
def index():
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE IF NOT EXISTS note (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO note (text) VALUES ('hello')")
    conn.commit()
    n = conn.execute("SELECT COUNT(*) FROM note").fetchone()[0]
    conn.close()
    return {"notes": n}


app.wsgi_app = reticle.wsgi(app.wsgi_app)
calls = []


def profiler(frame, event, arg):
    calls.append(event)


def tracer(frame, event, arg):
    calls.append(event)
    return None


stream = io.StringIO()
if kind == "cprofile":
    from werkzeug.middleware.profiler import ProfilerMiddleware
    app.wsgi_app = ProfilerMiddleware(app.wsgi_app, stream=stream, restrictions=[3])
elif kind == "profile-function":
    sys.setprofile(profiler)
elif kind == "trace-function":
    sys.settrace(tracer)
client = app.test_client()
statuses = [client.get("/").status_code for _ in range(3)]
found = {"profile": sys.getprofile(), "trace": sys.gettrace()}
sys.setprofile(None)
sys.settrace(None)
print(json.dumps({
    "statuses": statuses,
    "profiled": stream.getvalue().count("function calls"),
    "calls": len(calls),
    "profile_left": "profiler" if found["profile"] is profiler else repr(found["profile"]),
    "trace_left": "tracer" if found["trace"] is tracer else repr(found["trace"]),
    "watched": "pysqlite" in reticle._DRIVERS_WATCHED and getattr(reticle, "_MISSED_SQLITE", [0])[0] == 0,
    "unseen": reticle._unseen_drivers(),
    "python": "%d.%d" % sys.version_info[:2],
}))
