"""Server truth's default database watch beside the tools that use the interpreter's own hooks.

Once a middleware is made, every sqlite3 connection the process opens is watched; the watch is put on
just after the connection is made, through sys.monitoring (3.12+) or the thread's profile function.
It must compose with whatever else uses those hooks and leave it as it found it: a Flask app under
Werkzeug's ProfilerMiddleware (cProfile) answered every request 500 once a middleware was made
("'Profile' object is not callable").  Each tool runs in a process of its own (tests/_profiled_app.py):
an audit hook, once added, stays for the life of the interpreter."""

import glob
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "_profiled_app.py")
KINDS = ("none", "cprofile", "profile-function", "trace-function")


def _run(python, kind, *prefix):
    out = subprocess.run([python] + list(prefix) + [APP, kind], capture_output=True, text=True, timeout=120,
                         cwd=HERE)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check(result, kind, monitoring, trace="None"):
    assert result["statuses"] == [200, 200, 200], result
    assert result["profiled"] == (3 if kind == "cprofile" else 0), result  # the profiler ran on every request
    assert (result["calls"] > 0) == (kind in ("profile-function", "trace-function")), result
    assert result["profile_left"] == ("profiler" if kind == "profile-function" else "None"), result
    assert result["trace_left"] == ("tracer" if kind == "trace-function" else trace), result
    if kind == "cprofile" and not monitoring:
        # before 3.12 a profiler set from C can be neither called nor put back from Python: the connection is
        # left unwatched, and every record says sqlite3 is unseen (its writes unknown, never 0)
        assert result["watched"] is False and "sqlite3" in result["unseen"], result
    else:
        assert result["watched"] is True and result["unseen"] == [], result


@pytest.mark.parametrize("kind", KINDS)
def test_the_watch_composes_with_a_profiler_a_tracer_or_nothing(kind):
    _check(_run(sys.executable, kind), kind, sys.version_info >= (3, 12))


def test_the_watch_under_coverage():
    pytest.importorskip("coverage")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        result = _run(sys.executable, "none", "-m", "coverage", "run", "--data-file", os.path.join(tmp, "cov"))
        assert os.path.exists(os.path.join(tmp, "cov")), "coverage wrote no data"
    # coverage's tracer is still the thread's trace function (before 3.12; after, it uses sys.monitoring)
    traced = result["trace_left"] if result["trace_left"].startswith("<coverage.") else "None"
    assert sys.version_info >= (3, 12) or traced != "None", result
    _check(result, "none", sys.version_info >= (3, 12), trace=traced)


def _newer_python():
    """A CPython 3.12 or newer on this machine (sys.monitoring), other than this one, or None."""
    if sys.version_info >= (3, 12):
        return None
    for candidate in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9].*/bin/python3")), reverse=True):
        try:
            ok = subprocess.run([candidate, "-c", "import sys, sqlite3; assert sys.version_info >= (3, 12)"],
                                capture_output=True, timeout=30).returncode == 0
        except OSError:
            continue
        if ok:
            return candidate
    return None


def test_the_watch_through_sys_monitoring_on_a_newer_python(tmp_path):
    """Python 3.12 and newer: the watch is a sys.monitoring tool of its own, so even cProfile (set from C)
    runs untouched and the connection is watched.  Runs when the machine has such a Python (the app's
    packages installed into a fresh environment from tests/requirements.txt's pins for it)."""
    python = _newer_python()
    if python is None:
        pytest.skip("no CPython 3.12+ beside this one")
    sys.path.insert(0, HERE)
    from test_requirements import _pins_for
    version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    pins = _pins_for(version)
    env = str(tmp_path / "env")
    subprocess.run([python, "-m", "venv", env], check=True, timeout=120)
    wanted = ["flask", "tornado", "jsonschema", "cryptography"]
    install = subprocess.run([os.path.join(env, "bin", "python"), "-m", "pip", "install", "--disable-pip-version-check",
                              "-q"] + ["%s==%s" % (name, pins[name]) for name in wanted],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    for kind in KINDS:
        _check(_run(os.path.join(env, "bin", "python"), kind), kind, True)


SQLALCHEMY_LATER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import reticle
reticle.wsgi(lambda environ, start_response: [])   # a middleware made: every engine is to be watched
imported_by_reticle = "sqlalchemy" in sys.modules
import sqlalchemy                                   # the app imports it later, as apps do
engine = sqlalchemy.create_engine("sqlite://")
with engine.begin() as conn:
    conn.exec_driver_sql("CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT)")
rec = reticle._begin_record("%032x" % 7, "POST", "/notes", "127.0.0.1:1", "header")
token = reticle._current_request().set(rec)
with engine.begin() as conn:
    conn.exec_driver_sql("INSERT INTO note (text) VALUES ('x')")
reticle._current_request().reset(token)
out = reticle._finish_record(rec)
print(json.dumps({"imported_by_reticle": imported_by_reticle, "watched": out["watched"],
                  "writes": [(w["op"], w["table"], w["committed"]) for w in out["writes"]],
                  "loader": type(sqlalchemy.__loader__).__name__}))
'''


def test_making_a_middleware_does_not_import_sqlalchemy_but_watches_it_once_the_app_does():
    """SQLAlchemy merely installed is not imported by making a middleware (it cost 176-409 ms and ~12 MiB
    at the app's start); once the app imports it, its engines are watched as before."""
    pytest.importorskip("sqlalchemy")
    out = subprocess.run([sys.executable, "-c", SQLALCHEMY_LATER, os.path.dirname(HERE)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["imported_by_reticle"] is False, result
    assert "sqlalchemy" in result["watched"] and result["writes"] == [["insert", "note", True]], result
    assert result["loader"] != "_LoaderThen", result


JOBS_APP = r'''
import concurrent.futures, json, sqlite3, sys, threading, time
import reticle

sent = []
db = sys.argv[1]
sqlite3.connect(db).execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").connection.commit()


def write(v):
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO t (v) VALUES (?)", (v,))
    conn.close()


class Worker(threading.Thread):
    def run(self):
        write("subclass")


pool = concurrent.futures.ThreadPoolExecutor(1)


def app(environ, start_response):
    threading.Thread(target=write, args=("plain",), name="plain-job").start()
    threading.Timer(0.05, write, args=("timer",)).start()
    Worker().start()
    pool.submit(write, "pool").result()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


wrapped = reticle.wsgi(app)
wrapped.reticle_reporter.put = sent.append
env = {"REQUEST_METHOD": "POST", "PATH_INFO": "/save", "HTTP_HOST": "127.0.0.1", "HTTP_X_RETICLE_MARK": "%032x" % 7}
body = wrapped(env, lambda status, headers, exc_info=None: None)
list(body)
body.close()
time.sleep(0.5)
print(json.dumps(sent, default=str))
'''


def test_a_thread_a_request_starts_is_its_job_and_a_pools_worker_is_not(tmp_path):
    """A marked request that starts a plain Thread and a Timer running the app's function has two jobs: each
    sends a record of its own with its write once it ends, and the request's record names both; a Thread
    subclass and a pool's worker (which outlive the request) are no job, so no verdict waits for them."""
    script = tmp_path / "jobs_app.py"
    script.write_text(JOBS_APP)
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "jobs.db")], capture_output=True, text=True,
                         timeout=60, cwd=os.path.dirname(HERE),
                         env=dict(os.environ, RETICLE_PORT="9", PYTHONPATH=os.path.dirname(HERE)))
    assert out.returncode == 0, out.stderr
    sent = json.loads(out.stdout.strip().splitlines()[-1])
    request = [r for r in sent if not r.get("job")]
    jobs = [r for r in sent if r.get("job")]
    assert len(request) == 1 and [q["thread"] for q in request[0]["queued"]][0] == "plain-job", request
    assert sorted(q["job"] for q in request[0]["queued"]) == sorted(j["job"] for j in jobs), sent
    assert sorted(w["op"] + " " + w["table"] for j in jobs for w in j["writes"]) == ["insert t", "insert t"], jobs
    assert all(w["committed"] for j in jobs for w in j["writes"]) and request[0]["writes"] == [], sent
