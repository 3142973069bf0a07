"""The SDK's own regular-expression functions (N.replace, N.split, N.search, N.test in the config section
of src/sdk/reticle/): they run on the captured `exec` alone, so they must answer exactly as the built-ins
do.  Checked in Node against String.prototype.replace/split/search and RegExp.prototype.test on the
patterns the SDK uses and on random strings, patterns and replacement templates."""

import json
import os
import random
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "src", "sdk", "reticle", "01_config.js")

# the config section runs inside the SDK's IIFE: here inside a function of its own, in a world with a
# window and a document, and it hands back N
RUNNER = r"""
const fs = require('fs');
globalThis.window = globalThis;
globalThis.document = {};
const body = fs.readFileSync(process.argv[1], 'utf8');
const N = new Function(body.split('(function () {\n  \'use strict\';')[1] + '\nreturn N;')();
const cases = JSON.parse(fs.readFileSync(0, 'utf8'));
function rx(c) { return new RegExp(c.source, c.flags); }
function run(f) { try { return {ok: f()}; } catch (e) { return {error: String(e && e.name)}; } }
const bad = [];
for (const c of cases) {
  const pattern = c.source === undefined ? c.pattern : rx(c);
  const pairs = [
    ['replace', () => c.s.replace(c.source === undefined ? c.pattern : rx(c), c.rep),
                () => N.replace(c.s, pattern, c.rep)],
    ['replace(fn)', () => c.s.replace(c.source === undefined ? c.pattern : rx(c), (...a) => JSON.stringify(a)),
                    () => N.replace(c.s, pattern, (...a) => JSON.stringify(a))],
    ['split', () => c.s.split(c.source === undefined ? c.pattern : rx(c), c.limit),
              () => N.split(c.s, pattern, c.limit)],
  ];
  if (c.source !== undefined) {
    pairs.push(['search', () => c.s.search(rx(c)), () => N.search(c.s, rx(c))]);
    pairs.push(['test', () => rx(c).test(c.s), () => N.test(rx(c), c.s)]);
  }
  for (const [name, native, ours] of pairs) {
    const a = JSON.stringify(run(native)), b = JSON.stringify(run(ours));
    if (a !== b) bad.push({name, c, native: a, ours: b});
  }
}
process.stdout.write(JSON.stringify({checked: cases.length, bad: bad.slice(0, 10), badCount: bad.length}));
"""

# patterns of the kind the SDK uses (whitespace, separators, captures, unicode classes, alternations)
SOURCES = [(r"\s+", "g"), (r"\s+", ""), (r"[?#]", ""), (r"\r?\n", ""), (r"\r\n|\r|\n", ""), (r"(\w)(\d)?", "g"),
           (r"[^\p{L}\p{N}]+", "u"), (r"%([sdifoOc%])", "g"), (r"([?&])_r=\d+&?", ""), (r"[?&]$", ""),
           (r"", "g"), (r"x*", "g"), (r"(a)|(b)", "g"), (r"\b(Bearer|Token)\s+\w{3,}", "gi"), (r"^", "gm"),
           (r"(?:)", ""), (r"(z)", "y"), (r"[aeiou]", "gi"), (r"(\d+)-(\d+)", "g"), (r".", "gs")]
TEMPLATES = ["", "-", "$1", "$2", "$&", "$$", "$`", "$'", "[$1|$2]", "$10", "$01", "$0", "$9", "$", "a$", "$x",
             "$1 [redacted]", "$<n>"]
ALPHABET = "ab xyz\r\n?#&=-%s1234_\u00e9\u4e2d\U0001f600B"


def _cases(seed):
    rnd = random.Random(seed)
    out = []
    for _ in range(600):
        s = "".join(rnd.choice(ALPHABET) for _ in range(rnd.randrange(0, 24)))
        limit = rnd.choice([None, None, None, 0, 1, 2, 5])
        case = {"s": s, "rep": rnd.choice(TEMPLATES)}
        if limit is not None:
            case["limit"] = limit
        if rnd.random() < 0.75:
            case["source"], case["flags"] = rnd.choice(SOURCES)
        else:
            case["pattern"] = rnd.choice(["", " ", "a", "ab", "\r\n", "?", "#", "$1", "\U0001f600"])
        out.append(case)
    return out


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_sdks_own_replace_split_search_and_test_answer_as_the_built_ins(seed):
    done = subprocess.run(["node", "-e", RUNNER, CONFIG], input=json.dumps(_cases(seed)), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["checked"] == 600 and report["badCount"] == 0, report["bad"]
