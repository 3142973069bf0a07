"""Reports.

What `reticle verify` writes: the teeth of each flow's checks, JUnit XML, the HTML report, and the
shards of a split run merged back into one result.
"""

from __future__ import annotations

import collections
import datetime
import hashlib
import html
import json
import re
from typing import Any, Dict, List, Optional, Tuple

import jsonschema

from .constants import __version__
from .observation import _leaves
from .predicates import parse_predicate
from .timeline import TIMELINE_ROWS, _TIMELINE_COLOURS, _timeline_svg
from .toolbox import _SCHEMA_DIALECT
from .util import _Markup, _dumps, _html_join, _html_of, _short


# ---- reports of `reticle verify`: pure functions of the results (one dict per flow) ----
# A result: {name, verified: yes|no|unknown|error, ms, steps: [{index, step, verified, verifiedReason,
# because, predicate?, evidence?, ms?}], because, failedStep?, error?, screenshot? (base64 PNG)}.

_TEETH_AS = {"failed": ("answered 500", "the flow is still yes when that write fails"),
             "lie": ("answered as before, never sent (lie)",
                     "the flow is still yes when that write is answered as before but never reaches the server: "
                     "it never checks that the write was kept"),
             "envelope": ("answered with its framework's own failure (envelope)",
                          "the flow is still yes when that write fails the way its framework says so (a SvelteKit "
                          "action's failure envelope under HTTP 200)")}


def _teeth_name(t: dict) -> str:
    """A teeth replay as the reports name it: `POST /api/save`, `POST /api/save (lie)` or `POST /api/save
    (envelope)`."""
    return t["write"] + (" (%s)" % t["as"] if t.get("as") in ("lie", "envelope") else "")


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # not XML 1.0 characters


def _xml(value: Any) -> str:
    return html.escape(_XML_BAD.sub("?", str(value)), quote=True)


def _verify_exit(results: List[dict]) -> int:
    """0 when every flow is yes; 3 for any setup error, else 1 for any no, else 2 for any unknown,
    else 4 when `--teeth` found a flow toothless for a write."""
    verdicts = {r["verified"] for r in results}
    if not results or "error" in verdicts:
        return 3
    if "no" in verdicts:
        return 1
    if "unknown" in verdicts:
        return 2
    if any(r.get("toothless") for r in results):
        return 4
    return 0


def _step_failed(s: dict) -> bool:
    """A step that did not turn out as its flow expects (see _expectation)."""
    if "met" in s:
        return s["met"] is False
    return s.get("verified") in ("no", "unknown")


TEETH_MAX_DEFAULT = 8                # `verify --teeth` tests at most this many writes a flow, 2 replays each


def _checked_writes(flow: dict, writes: List[dict]) -> List[dict]:
    """The writes some check of `flow` looks at: a `net` or `server` leaf (not under a `not`) whose
    method (when it names one) and `urlContains` (when it has one) match the write's."""
    leaves: List[dict] = []
    for step in flow.get("steps", ()):
        for raw in (step.get("until"), step.get("assert")):
            if raw is None:
                continue
            try:
                leaves.extend(leaf for leaf, neg in _leaves(parse_predicate(raw, "until"))
                              if not neg and leaf["kind"] in ("net", "server"))
            except Exception:  # a flow's own check that does not parse fails its replay; here it checks nothing
                continue
    return [w for w in writes if any(
        (not leaf.get("method") or str(leaf["method"]).upper() == w["method"])
        and (not leaf.get("urlContains") or str(leaf["urlContains"]) in w["path"]) for leaf in leaves)]


def _teeth_plan(flow: dict, writes: List[dict], limit: int) -> Tuple[List[dict], List[dict]]:
    """Which writes `--teeth` fails on purpose (at most `limit`, so the page under test does not choose
    how long CI runs) and which it leaves untested.  Deterministic: first the writes the flow's checks
    look at (_checked_writes), then the others, each group in the order the replay first made them."""
    checked = _checked_writes(flow, writes)
    ordered = checked + [w for w in writes if w not in checked]
    return ordered[:max(0, limit)], ordered[max(0, limit):]


def _teeth_cell(r: dict) -> str:
    if "teeth" not in r:
        return "" if r["verified"] == "yes" else "-"
    untested = r.get("teethUntested") or []
    if untested:  # short: the names follow the table (_verify_table), and are in every report
        tested = "TOOTHLESS for %d replay(s)" % len(r["toothless"]) if r.get("toothless") else (
            "teeth for %d write(s)" % len({t["write"] for t in r["teeth"]}) if r["teeth"] else "none tested")
        return "%s; %d UNTESTED (over --teeth-max %s)" % (tested, len(untested), r.get("teethMax", "?"))
    if not r["teeth"]:
        return "no writes"
    if r.get("toothless"):
        return "TOOTHLESS for %s" % ", ".join(r["toothless"])
    return "teeth for %s" % ", ".join(_teeth_name(t) for t in r["teeth"] if t["verified"] != "skipped")


def _lies_skipped(r: dict) -> int:
    return sum(1 for t in r.get("teeth") or () if t["verified"] == "skipped")


def _failing_step(result: dict) -> Optional[dict]:
    i = result.get("failedStep")
    return result["steps"][i] if isinstance(i, int) and i < len(result.get("steps", [])) else None


def _junit_xml(results: List[dict], suite_name: str = "reticle verify") -> str:
    """JUnit XML: one <testsuite> per flow, one <testcase> per step; `no` and `unknown` steps are
    <failure> (type says which), steps after the failing one <skipped>, a setup error an <error>."""
    def count(r: dict, v: str) -> int:
        if v == "failed":
            return sum(1 for s in r.get("steps", []) if _step_failed(s)) + len(r.get("toothless") or ())
        return sum(1 for s in r.get("steps", []) if s.get("verified") == v)
    def cases(r: dict) -> int:
        return max(1, len(r.get("steps", []))) + len(r.get("teeth") or ()) + len(r.get("teethUntested") or ())
    total = sum(cases(r) for r in results)
    fails = sum(count(r, "failed") for r in results)
    errors = sum(1 for r in results if r["verified"] == "error")
    skipped = sum(count(r, "skipped") + len(r.get("teethUntested") or ()) + _lies_skipped(r) for r in results)
    secs = sum(r.get("ms", 0) for r in results) / 1000.0
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name="%s" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f">'
           % (_xml(suite_name), total, fails, errors, skipped, secs)]
    for r in results:
        steps = r.get("steps", [])
        classname = "reticle.flows.%s" % r["name"]
        out.append('  <testsuite name="%s" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f">'
                   % (_xml(r["name"]), cases(r), count(r, "failed"), 1 if r["verified"] == "error" else 0,
                      count(r, "skipped") + len(r.get("teethUntested") or ()) + _lies_skipped(r),
                      r.get("ms", 0) / 1000.0))
        if r.get("shard"):
            out.append('    <properties><property name="shard" value="%s"/></properties>' % _xml(r["shard"]))
        if r["verified"] == "error" and not steps:
            out.append('    <testcase name="setup" classname="%s" time="%.3f">'
                       % (_xml(classname), r.get("ms", 0) / 1000.0))
            out.append('      <error message="%s" type="setup"/>' % _xml(r.get("error", "setup error")))
            out.append('    </testcase>')
        for s in steps:
            out.append('    <testcase name="%s" classname="%s" time="%.3f">' % (
                _xml("step %d: %s" % (s["index"], s["step"])), _xml(classname), s.get("ms", 0) / 1000.0))
            if _step_failed(s):
                out.append('      <failure message="%s" type="%s">%s</failure>' % (
                    _xml(s.get("because") or s["verified"]), _xml(s["verified"]),
                    _xml(_dumps({"verifiedReason": s.get("verifiedReason"), "predicate": s.get("predicate"),
                                 "evidence": s.get("evidence")}))))
            elif s["verified"] == "skipped":
                out.append('      <skipped message="an earlier step of the flow failed"/>')
            out.append('    </testcase>')
        for t in r.get("teeth") or ():
            does, toothless = _TEETH_AS[t.get("as", "failed")]
            out.append('    <testcase name="%s" classname="%s" time="%.3f">' % (
                _xml("teeth: %s %s" % (t["write"], does)), _xml(classname), t.get("ms", 0) / 1000.0))
            if t["toothless"]:
                out.append('      <failure message="%s" type="toothless">%s</failure>' % (
                    _xml("toothless for %s: %s" % (t["write"], toothless)),
                    _xml(_dumps({"write": t["write"], "verified": t["verified"], "because": t.get("because")}))))
            elif t["verified"] == "skipped":
                out.append('      <skipped message="%s"/>' % _xml(t.get("note") or "not replayed"))
            out.append('    </testcase>')
        for w in r.get("teethUntested") or ():
            out.append('    <testcase name="%s" classname="%s" time="0.000">' % (
                _xml("teeth: %s answered 500" % w), _xml(classname)))
            out.append('      <skipped message="%s"/>' % _xml(
                "untested: the flow made more writes than --teeth-max %s" % r.get("teethMax", "")))
            out.append('    </testcase>')
        out.append('  </testsuite>')
    out.append('</testsuites>')
    return "\n".join(out) + "\n"


_REPORT_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}th,td{border:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}code,pre{font:12px/1.4 ui-monospace,monospace;
white-space:pre-wrap;word-break:break-word;margin:0}.yes{color:#0a7a2f;font-weight:600}.no,.error{color:#b00020;
font-weight:600}.unknown{color:#a15c00;font-weight:600}.skipped{color:#888}img{max-width:100%;
border:1px solid #ccc;margin:.5em 0}section{margin-bottom:2em}"""


_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def _html_steps(r: dict) -> _Markup:
    rows = [_html_join([_html_of('<tr class="step"><td>%s</td><td>%s</td><td><code>%s</code></td><td class="%s">'
                     "%s%s</td><td>%s</td><td><pre>%s</pre></td></tr>",
                     s["index"], s["step"], _dumps(s["predicate"]) if s.get("predicate") else "", s["verified"],
                     s["verified"], " (%s)" % s["verifiedReason"] if s.get("verifiedReason") else "",
                     "%d ms" % s["ms"] if "ms" in s else "",
                     ((s.get("because") or "") + ("\n" + json.dumps(s["evidence"], indent=1, ensure_ascii=False)[:4000]
                                                  if s.get("evidence") else "")).strip()),
                         _html_timeline(s)]) for s in r["steps"]]
    return _html_of("<table><tr><th>#</th><th>step</th><th>predicate</th><th>verdict</th><th>time</th>"
                    "<th>evidence</th></tr>%s</table>", _html_join(rows))


def _html_timeline(step: dict) -> _Markup:
    """A step's timeline under its row: inline SVG (_timeline_svg), open when the step did not pass."""
    if not isinstance(step.get("timeline"), dict):
        return _Markup("")
    return _html_of('<tr class="timeline"><td></td><td colspan="5"><details%s><summary>timeline of step %s'
                    "</summary>%s</details></td></tr>", _Markup(" open") if step.get("verified") != "yes" else "",
                    step.get("index"), _Markup(_timeline_svg(step["timeline"])))


def _html_teeth(r: dict) -> _Markup:
    rows = [_html_of('<tr class="teeth"><td><code>%s</code></td><td>%s</td><td class="%s">%s</td>'
                     '<td class="%s">%s</td><td>%s</td></tr>',
                     t["write"], _TEETH_AS[t.get("as", "failed")][0], t["verified"], t["verified"],
                     "no toothless" if t["toothless"] else "yes", "toothless" if t["toothless"] else "teeth",
                     t.get("note") or t.get("because") or "") for t in r.get("teeth") or ()]
    rows += [_html_of('<tr class="untested"><td><code>%s</code></td><td>-</td><td class="skipped">-</td>'
                      '<td class="skipped">untested</td><td>over --teeth-max %s: not replayed with this '
                      "write failed</td></tr>", w, r.get("teethMax", "")) for w in r.get("teethUntested") or ()]
    return _html_of("<table><tr><th>write</th><th>answered</th><th>flow verdict</th><th>teeth</th><th>because</th>"
                    "</tr>%s</table>", _html_join(rows))


def _html_flow(r: dict) -> _Markup:
    """One flow's section of the HTML report."""
    parts = [_html_of('<section id="flow-%s" class="flow"><h2>%s <span class="%s">%s</span></h2>',
                      r["name"], r["name"], r["verified"], r["verified"])]
    if r.get("startUrl"):
        parts.append(_html_of("<p>start: <code>%s</code></p>", r["startUrl"]))
    if r.get("shard"):
        parts.append(_html_of("<p>shard: %s</p>", r["shard"]))
    if r.get("error"):
        parts.append(_html_of('<p class="error">setup error: %s</p>', r["error"]))
    if r.get("steps"):
        parts.append(_html_steps(r))
    if r.get("teeth") or r.get("teethUntested"):
        parts.append(_html_teeth(r))
    shot = r.get("screenshot")
    if isinstance(shot, str) and shot and _BASE64.match(shot):
        failing = _failing_step(r)
        parts.append(_html_of('<figure><img alt="screenshot at step %s" src="data:image/png;base64,%s">'
                              "<figcaption>the page when step %s failed</figcaption></figure>",
                              r.get("failedStep"), shot,
                              "%d (%s)" % (failing["index"], failing["step"]) if failing else "?"))
    elif shot:
        parts.append(_html_of('<p class="error">%s</p>', "the screenshot is left out: it is not base64 data"))
    parts.append(_html_of("</section>"))
    return _html_join(parts)


def _html_report(results: List[dict], title: str = "Reticle verify") -> str:
    """One self-contained page: a summary table, then each flow's steps with predicate, verdict,
    evidence and timing, and the screenshot of a failing step inline (data: URL).  Every field goes
    in through _html_of (escaped); the screenshot only when it is base64."""
    sharded = any("shard" in r for r in results)  # merged shards: each flow's shard (reticle report merge)
    rows = [_html_of('<tr><td><a href="#flow-%s">%s</a></td><td>%s</td><td class="%s">%s</td><td>%s</td>'
                     '<td>%s</td><td class="%s">%s</td>%s</tr>',
                     r["name"], r["name"], len(r.get("steps", [])), r["verified"], r["verified"],
                     "%.2f s" % (r.get("ms", 0) / 1000.0), r.get("error") or r.get("because") or "",
                     "no toothless" if r.get("toothless") else "yes", _teeth_cell(r),
                     _html_of('<td class="shard">%s</td>', r.get("shard", "")) if sharded else "")
            for r in results]
    page = _html_of(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n<title>%s</title><style>%s</style></head>'
        "<body>\n<h1>%s</h1>\n<p>%s flow(s), exit code %s, generated %s by reticle %s.</p>\n"
        "<table><tr><th>flow</th><th>steps</th><th>verdict</th><th>time</th><th>because</th><th>teeth</th>%s</tr>"
        "\n%s\n</table>\n%s\n</body></html>\n",
        title, _Markup(_REPORT_CSS), title, len(results), _verify_exit(results),
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"), __version__,
        _Markup("<th>shard</th>") if sharded else "", _Markup("\n".join(rows)),
        _Markup("\n".join(_html_flow(r) for r in results)))
    return str(page)


# ---- shards of `reticle verify` and their merge: pure functions ----
# `verify --shard I/N` runs one of N disjoint parts of the selected flows (one CI job each);
# `reticle report merge` joins the parts' `--json` results into one run's reports and exit code.

SHARD_MAX = 256                      # the largest N of --shard I/N
RESULTS_MAX_BYTES = 256 << 20        # a results file (`--json` output, screenshots inline) read by merge/--durations
RESULTS_MAX_FLOWS = 100000           # flows (and selected names) one results file may hold

# What `reticle verify --json` writes (a shard's results too), field by field: `report merge` and
# `--durations` read nothing a results file says before this schema passed it, so a field of the wrong
# type or an unknown verdict is a clean error naming the file and the field, never a traceback, a
# false pass or a report built from it.  The free-form parts (a step's predicate and evidence, the
# writes, the faults) are shown escaped and decide nothing.
_TEXT = {"type": "string", "maxLength": 100000}
_MAYBE_TEXT = {"type": ["string", "null"], "maxLength": 100000}
_MS = {"type": "number", "minimum": 0, "maximum": 1e12}
_NAMES_LIST = {"type": "array", "maxItems": RESULTS_MAX_FLOWS, "items": _TEXT}
_RESULTS_SCHEMA: Dict[str, Any] = {
    "$schema": _SCHEMA_DIALECT, "type": "object", "required": ["flows"], "additionalProperties": False,
    "properties": {
        "exitCode": {"type": "integer", "minimum": 0, "maximum": 255},
        "ms": _MS,
        "flows": {"type": "array", "maxItems": RESULTS_MAX_FLOWS, "items": {"$ref": "#/$defs/flow"}},
        "shard": {"type": "object", "required": ["index", "total", "selected"], "additionalProperties": False,
                  "properties": {"index": {"type": "integer", "minimum": 1, "maximum": SHARD_MAX},
                                 "total": {"type": "integer", "minimum": 1, "maximum": SHARD_MAX},
                                 "selected": _NAMES_LIST, "byDurations": {"type": "boolean"}}}},
    "$defs": {
        "flow": {"type": "object", "required": ["name", "verified"], "additionalProperties": False, "properties": {
            "name": {"type": "string", "maxLength": 1000},
            "verified": {"enum": ["yes", "no", "unknown", "error"]},
            "verifiedReason": _MAYBE_TEXT, "because": _MAYBE_TEXT, "error": _TEXT, "note": _TEXT, "ms": _MS,
            "steps": {"type": "array", "maxItems": 10000, "items": {"$ref": "#/$defs/step"}},
            "failedStep": {"type": ["integer", "null"], "minimum": 0},
            "startUrl": _MAYBE_TEXT, "sessionId": _MAYBE_TEXT,
            "screenshot": {"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$"},  # base64: a PNG, inline
            "screenshotError": _TEXT,
            "writes": {"type": "array", "items": {"type": "object"}},
            "faults": {"type": "array", "items": {"type": "object"}},
            "authSaved": {"type": "object"}, "authRemade": {"type": "object"},
            "teeth": {"type": "array", "maxItems": 10000, "items": {"$ref": "#/$defs/tooth"}},
            "toothless": _NAMES_LIST, "teethUntested": _NAMES_LIST,
            "teethMax": {"type": "integer", "minimum": 0},
            "setupOnly": {"type": "boolean"},
            "shard": {"type": "string", "pattern": "^[0-9]{1,3}/[0-9]{1,3}$"}}},  # a merged run, merged again
        "step": {"type": "object", "required": ["index", "step", "verified"], "additionalProperties": False,
                 "properties": {
                     "index": {"type": "integer", "minimum": 0}, "step": _TEXT,
                     "verified": {"enum": ["yes", "no", "unknown", "skipped", "error"]},
                     "verifiedReason": _MAYBE_TEXT, "because": _MAYBE_TEXT, "ms": _MS,
                     "predicate": {}, "evidence": {}, "writes": {"type": "array", "items": {"type": "object"}},
                     "expect": {"enum": ["no"]}, "met": {"type": "boolean"},
                     "timeline": {"type": "object", "additionalProperties": False, "properties": {
                         "act": _TEXT, "end": _MS, "verdict": _TEXT, "more": {"type": "integer", "minimum": 0},
                         "rows": {"type": "array", "maxItems": TIMELINE_ROWS, "items": {
                             "type": "object", "additionalProperties": False, "properties": {
                                 "k": {"enum": list(_TIMELINE_COLOURS)}, "s": _MS, "e": {"type": ["number", "null"]},
                                 "t": _TEXT, "at": _TEXT, "fail": {"type": "boolean"}}}}}}}},
        "tooth": {"type": "object", "required": ["write", "verified", "toothless"], "additionalProperties": False,
                  "properties": {
                      "write": _TEXT, "as": {"enum": list(_TEETH_AS)},
                      "verified": {"enum": ["yes", "no", "unknown", "error", "skipped"]},
                      "toothless": {"type": "boolean"}, "ms": _MS, "because": _MAYBE_TEXT, "note": _TEXT,
                      "failedStep": {"type": ["integer", "null"], "minimum": 0}}}}}
_RESULTS_VALIDATOR = jsonschema.Draft202012Validator(_RESULTS_SCHEMA)
_JSON_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"), (list, "an array"),
               (dict, "an object"), (type(None), "null"))


def _results_problem(doc: Any) -> Optional[str]:
    """What makes `doc` no `reticle verify --json` results (_RESULTS_SCHEMA), naming the field
    ("flows[2].steps[0].index is a string; expected integer"), or None.  The message is built from
    the schema and the field's path, never from the field's value, which can be anything."""
    err = jsonschema.exceptions.best_match(_RESULTS_VALIDATOR.iter_errors(doc))
    if err is None:
        return None
    where = "".join("[%d]" % p if isinstance(p, int) else ".%s" % _short(str(p), 40) for p in err.absolute_path)
    where = where.lstrip(".") or "the file"
    got = next(name for kind, name in _JSON_TYPES if isinstance(err.instance, kind))
    rule, want = err.validator, err.validator_value
    if rule == "type":
        return "%s is %s; expected %s" % (where, got, " or ".join(want) if isinstance(want, list) else want)
    if rule == "enum":
        return "%s is %s; expected one of %s" % (where, _short(_dumps(err.instance), 40), ", ".join(map(str, want)))
    if rule == "required":
        missing = [k for k in want if isinstance(err.instance, dict) and k not in err.instance]
        return "%s lacks the field %s" % (where, ", ".join(missing))
    if rule == "additionalProperties":
        known = (err.schema.get("properties") or {}).keys()
        extra = sorted(k for k in err.instance if k not in known) if isinstance(err.instance, dict) else []
        return "%s has the unknown field %s (accepted: %s)" % (where, _short(", ".join(extra), 80),
                                                               ", ".join(sorted(known)))
    return "%s breaks the rule %s: %s (it is %s)" % (where, rule, _short(_dumps(want), 60), got)


def _hash64(*parts: str) -> int:
    """A hash that is the same in every process and on every machine (unlike hash())."""
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()[:8], "big")


def _shard_plan(names: List[str], n: int, durations: Optional[Dict[str, float]] = None) -> List[int]:
    """The shard (0 .. n-1) of each flow in `names`: a pure function of the multiset of names, `n` and
    `durations`, so every CI job computes the same split whatever the order of the list.
    Without durations (bounded-load rendezvous hashing): each flow ranks the shards by a hash of
    (its name, the shard) and takes the first one not yet full (floor(len/n) flows, or one more
    while fewer than len % n shards hold more), the flows taken in the order of a hash of their
    names.  Shards differ by at most one flow, and adding or removing a flow moves few others (a
    plain hash moves none but leaves shards uneven; a round-robin over a sorted list moves most).
    With durations (milliseconds per name, from a previous run): longest first, each flow to the
    shard with the least time so far, ties to the flow's preferred shard; a flow the file does not
    know counts as the median of the known ones."""
    m = len(names)
    out = [0] * m
    if n <= 1 or not m:
        return out

    def ranks(i: int) -> List[int]:
        return sorted(range(n), key=lambda s: (-_hash64(names[i], str(s)), s))
    order = sorted(range(m), key=lambda i: (_hash64(names[i]), names[i], i))
    known = [float(durations[x]) for x in names if durations and x in durations]
    if not known:
        low, extra = divmod(m, n)  # `extra` shards hold low + 1 flows, the others low
        count = [0] * n
        for i in order:
            big = sum(1 for c in count if c > low)
            out[i] = next(s for s in ranks(i) if count[s] < low or (count[s] == low and big < extra))
            count[out[i]] += 1
        return out
    middle = sorted(known)[len(known) // 2]
    weight = [float(durations[x]) if durations and x in durations else middle for x in names]
    load = [0.0] * n
    for i in sorted(order, key=lambda i: -weight[i]):  # stable: equal weights keep the hash order
        pref = ranks(i)
        out[i] = min(range(n), key=lambda s: (load[s], pref.index(s)))
        load[out[i]] += weight[i]
    return out


def _durations_of(doc: Any) -> Dict[str, float]:
    """Milliseconds per flow name from a previous run's `--json` results (of verify or of a merge);
    ValueError naming what is wrong otherwise."""
    flows = doc.get("flows") if isinstance(doc, dict) else None
    if not isinstance(flows, list):
        raise ValueError("it is not the --json output of `reticle verify` or `reticle report merge` "
                         "(an object with a `flows` list)")
    problem = _results_problem(doc)
    if problem:
        raise ValueError("it is not the --json output of `reticle verify` or `reticle report merge`: %s" % problem)
    out: Dict[str, float] = {}
    for r in flows:
        if isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("ms"), (int, float)) \
                and not isinstance(r.get("ms"), bool) and 0 <= r["ms"] < float("inf"):
            out[r["name"]] = float(r["ms"]) + out.get(r["name"], 0.0)
    return out


def _merge_error(name: str, error: str) -> dict:
    return {"name": name, "verified": "error", "verifiedReason": "flow_error", "steps": [], "ms": 0, "error": error}


def _merge_shards(docs: List[Tuple[str, Any]]) -> List[dict]:
    """The results of one run from its shards' `--json` results ((file, parsed JSON) each), in the
    unsharded order, each flow marked with its `shard` ("i/n").  Anything that would make the merged
    verdict differ from one run's is an error result (exit 3), never dropped: a file that is not
    shard results, shards of different sizes or flow selections, a shard missing or given twice, a
    flow that ran in no shard or in two."""
    problems: List[str] = []
    seen: Dict[int, str] = {}
    totals = set()
    selections: Dict[str, List[str]] = {}
    parts: List[Tuple[str, List[dict]]] = []
    for path, doc in docs:
        info = doc.get("shard") if isinstance(doc, dict) else None
        flows = doc.get("flows") if isinstance(doc, dict) else None
        if not isinstance(flows, list):
            problems.append("%s is not `reticle verify --json` output (an object with a `flows` list)" % path)
            continue
        problem = _results_problem(doc)
        if problem is None and isinstance(info, dict) and info["index"] > info["total"]:
            problem = "shard.index is %d, past shard.total %d" % (info["index"], info["total"])
        if problem:
            problems.append("%s is not `reticle verify --json` output: %s" % (path, problem))
            continue
        if info is None:
            if len(docs) > 1:
                problems.append("%s holds no `shard` (was it run with --shard I/N?)" % path)
                continue
            info = {"index": 1, "total": 1, "selected": [r["name"] for r in flows]}
        totals.add(info["total"])
        if info["index"] in seen:
            problems.append("shard %d/%d is given twice: %s and %s" % (info["index"], info["total"],
                                                                      seen[info["index"]], path))
            continue
        seen[info["index"]] = path
        selections[path] = [str(x) for x in info["selected"]]
        parts.append(("%d/%d" % (info["index"], info["total"]), flows))
    if len(totals) > 1:
        problems.append("the files come from different shard counts (%s)" % ", ".join(
            "/%d" % t for t in sorted(totals)))
    elif totals:
        total = totals.pop()
        missing = [str(i) for i in range(1, total + 1) if i not in seen]
        if missing:
            problems.append("shard(s) %s of %d missing: no results file for them" % (", ".join(missing), total))
    if len({tuple(v) for v in selections.values()}) > 1:
        problems.append("the shards were split from different flow selections (%s): run every shard with the "
                        "same FLOWS" % "; ".join("%s: %d flows" % (p, len(v)) for p, v in selections.items()))
    selected = next(iter(selections.values()), [])
    return _merge_flows(parts, selected) + [_merge_error("(merge)", p) for p in problems]


def _merge_flows(parts: List[Tuple[str, List[dict]]], selected: List[str]) -> List[dict]:
    """Each selected flow's one result (marked with its shard), in the selection's order; a flow that
    ran in no shard or in more than one is an error result naming the shards; a result no shard
    selected (a setup error about the run, such as a stranger on the port) is kept, once."""
    by_name: Dict[str, List[dict]] = {}
    extra: List[dict] = []
    want = collections.Counter(selected)
    for label, flows in parts:
        for r in flows:
            r = dict(r, shard=label)
            if r["name"] in want and r.get("setupOnly"):
                continue  # a shard ran it for its own flows; the shard that drew it reports it
            if r["name"] in want:
                by_name.setdefault(r["name"], []).append(r)
            elif not any(x["name"] == r["name"] and x.get("error") == r.get("error") for x in extra):
                extra.append(r)
    out: List[dict] = []
    for name in sorted(want, key=selected.index):
        got = by_name.get(name, [])
        if len(got) == want[name]:
            out.extend(got)
        elif not got:
            out.append(_merge_error(name, "the flow ran in no shard (is a shard's results file missing?)"))
        else:
            out.append(_merge_error(name, "the flow ran %d times, in shards %s, where it was selected %d time(s): "
                                          "the shards were not split alike (the same FLOWS and --durations file "
                                          "in every job)" % (len(got), ", ".join(r["shard"] for r in got),
                                                             want[name])))
    return out + extra
