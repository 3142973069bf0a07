"""Timelines.

The timeline of one act: its rows, and the SVG drawing of them.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, List

from .conventions import _is_failure_ui
from .events import _call_failed, _is_dev
from .server_judge import _server_line, _server_records
from .util import _Markup, _html_join, _html_of, _short


# ---- the timeline of a step: what happened when, as data and as a picture ----
# A step's window drawn on its own clock (0: the act): each request as a bar (its sender named), the
# server's record under the request it answers, messages from shown to gone, console and uncaught errors
# as points, the end where it was judged and the verdict.  The data is compact (kept in verify's results
# file for the report); _timeline_svg draws it as SVG with no script and no external asset.

TIMELINE_ROWS = 40   # rows of one timeline, at most (the rest counted in `more`)


def _timeline(window: List[dict], t0: float, end: float, verdict: str, act: str) -> dict:
    """The timeline of a step whose act was at `t0` (daemon clock, ms) and was judged at `end`."""
    rows: List[dict] = []   # in the window's order; a server record right under its request
    records = {(r.get("documentId"), str(r.get("requestId"))): r for r in _server_records(window)}
    marks = {str(e["data"].get("requestId")): (e.get("doc"), str(e["data"].get("serverMark")))
             for e in window if e["type"] == "net.pending" and e["data"].get("serverMarked")}
    done = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.request"}
    gone = {str(e["data"].get("text")): e["t"] for e in window if e["type"] == "ui.gone"}
    for e in window:
        d, kind, t = e["data"], e["type"], round(e["t"] - t0)
        if kind in ("net.request", "net.pending") and not _is_dev(d):
            if kind == "net.pending" and str(d.get("requestId")) in done:
                continue
            ms = d.get("ms") if isinstance(d.get("ms"), (int, float)) else 0
            path = urllib.parse.urlsplit(str(d.get("url") or "")).path or str(d.get("url") or "?")
            row = {"k": "req", "s": max(0, round(t - ms)) if kind == "net.request" else t,
                   "e": t if kind == "net.request" else None,
                   "t": _short("%s %s %s" % (str(d.get("method") or "GET").upper(), path,
                                             d.get("status") or d.get("error") or "pending"), 120),
                   "fail": kind == "net.request" and _call_failed(d)}
            if d.get("at"):
                row["at"] = _short(str(d["at"]), 160)
            rows.append(row)
            record = records.get(marks.get(str(d.get("requestId")), (None, "")))
            if record is not None:
                rows.append({"k": "srv", "s": row["e"] if row["e"] is not None else t,
                             "t": _short(_server_line(record), 160), "fail": bool(record.get("exception"))})
        elif kind in ("ui.alert", "ui.status"):
            text = str(d.get("text") or "")
            until = gone.get(text)
            rows.append({"k": "msg", "s": t, "e": round(until - t0) if until is not None and until >= e["t"] else None,
                         "t": _short(repr(text), 120), "fail": _is_failure_ui(d)})
            if d.get("at"):
                rows[-1]["at"] = _short(str(d["at"]), 160)
        elif kind in ("console.error", "error.uncaught"):
            rows.append({"k": "err", "s": t, "fail": True, "t": _short("%s: %s" % (
                "uncaught" if kind == "error.uncaught" else "console.error", d.get("text") or d.get("message") or ""),
                120)})
            if d.get("at"):
                rows[-1]["at"] = _short(str(d["at"]), 160)
    groups: List[List[dict]] = []  # drawn by start: a request (and its record), a message, an error
    for row in rows:
        if row["k"] == "srv" and groups:
            groups[-1].append(row)
        else:
            groups.append([row])
    groups.sort(key=lambda g: g[0]["s"])
    rows = [row for g in groups for row in g]
    out = {"act": _short(act, 120), "end": max(0, round(end - t0)), "verdict": verdict, "rows": rows[:TIMELINE_ROWS]}
    if len(rows) > TIMELINE_ROWS:
        out["more"] = len(rows) - TIMELINE_ROWS
    return out


_TIMELINE_COLOURS = {"req": ("#2e7d32", "#c62828"), "srv": ("#5c6bc0", "#c62828"), "msg": ("#6d6d6d", "#c62828"),
                     "err": ("#c62828", "#c62828")}


def _timeline_svg(tl: Any) -> str:
    """A timeline (_timeline's data, or a results file's: read defensively) as one SVG document: a label
    column, bars on the step's own clock, the act and the verdict as lines; every text escaped."""
    tl = tl if isinstance(tl, dict) else {}
    rows = [r for r in tl.get("rows") or [] if isinstance(r, dict)][:TIMELINE_ROWS]
    end: float = float(tl["end"]) if isinstance(tl.get("end"), (int, float)) else 0.0
    times = [float(r[k]) for r in rows for k in ("s", "e") if isinstance(r.get(k), (int, float))]
    span = min(max([end, 1.0] + times), 1e9)
    left, width, line = 330.0, 420.0, 30
    height = 46 + line * len(rows) + 20

    def x(ms: Any) -> float:
        return left + width * min(max(float(ms) if isinstance(ms, (int, float)) else 0.0, 0.0), span) / span
    verdict = str(tl.get("verdict") or "?")
    parts = [_html_of('<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" '
                      'font-family="sans-serif" font-size="11" role="img"><title>%s</title>'
                      '<rect width="100%%" height="100%%" fill="#fff"/>',
                      int(left + width + 20), height, int(left + width + 20), height,
                      "timeline of %s: %s" % (tl.get("act"), verdict)),
             _html_of('<text x="4" y="16" font-weight="bold">act: %s</text>', _short(str(tl.get("act") or ""), 60)),
             _html_of('<line x1="%s" y1="22" x2="%s" y2="%s" stroke="#333"/><text x="%s" y="34">0 ms</text>',
                      left, left, height - 16, left + 2)]
    for i, r in enumerate(rows):
        y = 46 + i * line
        kind = str(r.get("k")) if r.get("k") in _TIMELINE_COLOURS else "msg"
        colour = _TIMELINE_COLOURS[kind][1 if r.get("fail") else 0]
        label = ("↳ " if kind == "srv" else "") + str(r.get("t") or "")
        parts.append(_html_of('<text x="%s" y="%s" fill="%s"><title>%s</title>%s</text>', 4 if kind != "srv" else 16,
                              y + 10, colour, label, _short(label, 52)))  # the whole line as its tooltip
        if r.get("at"):
            parts.append(_html_of('<text x="%s" y="%s" fill="#555" font-size="10">%s %s</text>',
                                  4 if kind != "srv" else 16, y + 22,
                                  {"msg": "rendered by", "req": "sent by"}.get(kind, "at"),
                                  _short(str(r["at"]), 56)))
        x1 = x(r.get("s"))
        if kind in ("err", "srv"):
            parts.append(_html_of('<circle cx="%s" cy="%s" r="5" fill="%s"/>', round(x1, 1), y + 8, colour))
            continue
        x2 = x(r["e"]) if isinstance(r.get("e"), (int, float)) else x(span)
        parts.append(_html_of('<rect x="%s" y="%s" width="%s" height="12" rx="2" fill="%s"%s/>', round(x1, 1), y + 2,
                              round(max(x2 - x1, 3.0), 1), colour,
                              _Markup(' fill-opacity="0.35" stroke-dasharray="3 2" stroke="%s"' % colour)
                              if r.get("e") is None else ""))
    ex, tone = round(x(end), 1), {"yes": "#2e7d32", "no": "#c62828"}.get(verdict, "#b26a00")
    parts.append(_html_of('<line x1="%s" y1="22" x2="%s" y2="%s" stroke="%s" stroke-dasharray="4 3"/><text x="%s" '
                          'y="%s" text-anchor="end" font-weight="bold" fill="%s">judged at %s ms: %s</text>',
                          ex, ex, height - 16, tone, ex, height - 4, tone, round(end), verdict))
    if isinstance(tl.get("more"), int):
        parts.append(_html_of('<text x="4" y="%s" fill="#555">%s more not drawn</text>', height - 4, tl["more"]))
    parts.append(_Markup("</svg>"))
    return str(_html_join(parts))
