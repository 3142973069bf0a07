"""reticle.py copied alone into another package works there under its new name.

This is the six.py contract: a host project drops the file into ``host/_vendor/reticle.py``,
imports ``host._vendor.reticle`` (its three dependencies installed normally) and serves
``make_app()`` from its own process.  Nothing may refer to the module as ``reticle``.
"""

import importlib
import json
import os
import shutil
import sys
import tempfile

from tornado.testing import AsyncHTTPTestCase
from tornado.testing import gen_test

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETICLE = os.path.join(REPO, "reticle.py")


class VendoredCopyTest(AsyncHTTPTestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="reticle-vendor-")
        vendor = os.path.join(self.folder, "host", "_vendor")
        os.makedirs(vendor)
        for package in (os.path.dirname(vendor), vendor):
            with open(os.path.join(package, "__init__.py"), "w", encoding="utf-8"):
                pass
        shutil.copyfile(RETICLE, os.path.join(vendor, "reticle.py"))
        self.saved_environ = dict(os.environ)
        os.environ["RETICLE_STATE_DIR"] = os.path.join(self.folder, "state")
        self.plain_reticle = sys.modules.get("reticle")
        sys.path.insert(0, self.folder)
        self.module = importlib.import_module("host._vendor.reticle")
        super().setUp()

    def tearDown(self):
        super().tearDown()
        sys.path.remove(self.folder)
        for name in list(sys.modules):
            if name == "host" or name.startswith("host."):
                del sys.modules[name]
        os.environ.clear()
        os.environ.update(self.saved_environ)
        shutil.rmtree(self.folder, ignore_errors=True)

    def get_app(self):
        hub = self.module.Hub(state_dir=os.path.join(self.folder, "state"), port=self.get_http_port())
        return self.module.make_app(hub)

    def test_imports_under_the_host_package(self):
        module = self.module
        assert module.__name__ == "host._vendor.reticle"
        assert os.path.dirname(module.__file__) == os.path.join(self.folder, "host", "_vendor")
        # Importing the copy must not import (or shadow) a top-level "reticle".
        assert sys.modules.get("reticle") is self.plain_reticle
        for name in getattr(module, "__all__", ()):
            assert hasattr(module, name), name

    @gen_test
    async def test_serves_status(self):
        response = await self.http_client.fetch(self.get_url("/status"), raise_error=False)
        assert response.code == 200, response.body
        assert response.headers["Content-Type"].startswith("application/json")
        status = json.loads(response.body)
        assert status["running"] is True
        assert status["version"] == self.module.__version__


def test_a_vendored_import_loads_no_pytest(tmp_path):
    """The pytest plugin's hooks import pytest only when pytest calls them: importing the copy
    (in a fresh interpreter) loads neither pytest nor xdist, and the hooks are there."""
    vendor = tmp_path / "host" / "_vendor"
    vendor.mkdir(parents=True)
    for package in (vendor.parent, vendor):
        (package / "__init__.py").write_text("")
    shutil.copyfile(RETICLE, str(vendor / "reticle.py"))
    code = ("import sys; import host._vendor.reticle as r; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest', 'xdist', 'pluggy'))); "
            "print(sorted(n for n in dir(r._PytestPlugin) if n.startswith('pytest_')))")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    loaded, hooks = out.stdout.splitlines()
    assert loaded == "[]", loaded
    assert "pytest_addoption" in hooks and "pytest_collection_modifyitems" in hooks, hooks
