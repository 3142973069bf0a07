"""Storage truth: the app's own store watched read-only as a witness (stores.py, store_judge.py).

Real stacks with no server voice (plain PHP on SQLite and PostgreSQL, a Node app keeping a JSON file), in
real Chromium, in a device and through the script tag; the truth is read from the store by the test itself.
"""

import os

import pytest

from _harness import chromium_path  # noqa: F401  (a browser test module: conftest marks it `browser`)
from test_server import PhpNotes, _note, open_tab


def watch(mcp, url):
    out = mcp.ok("reticle_watch_db", {"url": url})
    assert out["watching"]["store"], out
    return out


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_json_file_store_witnesses_a_classic_php_form(device, tmp_path, daemon, mcp):
    app = PhpNotes(tmp_path, daemon)
    sid, browser = open_tab(mcp, app, device=device, path="/notes/new")
    try:
        watch(mcp, "file://" + app.store)
        out = _note(mcp, sid, "Buy milk")
        print(out["verified"], out["because"])
        assert out["verified"] == "yes", out
        assert "notes +1" in out["because"] or "+1" in out["because"], out["because"]
        assert app.rows() == 1
    finally:
        if browser is not None:
            browser.close()
        app.close()
