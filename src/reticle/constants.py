"""Constants and logging.

The daemon's limits, budgets and defaults in one place (each with what it bounds), and the
structured logging every module writes through (_emit).
"""

from __future__ import annotations

import logging
from typing import Any


__version__ = "0.1.0"


DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4400
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_PROTOCOL = PROTOCOL_VERSIONS[-1]
BRIDGE_PROTOCOL = 1

MAX_BODY_BYTES = 4 * 1024 * 1024          # 413 above this (DESIGN section 4)
BODY_TIMEOUT_S = 10.0                      # 408 when a body takes longer
SSE_KEEPALIVE_S = 25.0                     # SSE comment keepalive
RATE_DEFAULT = (100.0, 200.0)              # requests/s and burst, per session key
# The largest frame the SDK sends: it batches events into frames of at most
# this size and chunks anything larger, so a bigger frame is hostile (1009).
WS_MAX_MESSAGE_BYTES = 1 << 20
WS_PING_INTERVAL_S = 20
HELLO_TIMEOUT_S = 5.0
MAX_SESSIONS = 32
MAX_PENDING_HANDSHAKES = 16
REFUSALS_KEPT = 8                          # script loads and bridge sockets refused lately, named by reticle_sessions
MAX_DEPARTED = 8                           # closed tabs kept for a reload to resume (each keeps its buffer)
DEPARTED_KEEP_MS = 60_000
COMMAND_TIMEOUT_S = 8.0
RETRY_GRACE_MS = 250                       # a write answered otherwise is final after this (a client may retry)
OBSERVE_MAX_BYTES = 32 * 1024             # one reticle_observe answer; `next` pages on
NAV_WAIT_S = 10.0                          # how long a verdict waits for a tab's next document
STRANDED_NOTE = "a page without Reticle's script tag"  # what a stranded tab left for (observe, judge)
ATTACHED_NOTE = ("the user's own tab (attached): real input in the tab they see, with their cookies and logins; "
                 "reticle_close detaches and leaves it open")
DEVICE_LOST_NOTE = "the device's browser connection was lost"  # how a device whose browser went starts its why
STRANDED_MS = 1500.0                       # a tagged tab whose socket left this long ago, no page back: stranded
ARRIVAL_WAIT_MS = 2000.0                   # how long a new document's hello waits for its first events
_PAGE_BLIND_SPOTS = ("cross-origin-iframe", "closed-shadow-root")  # page parts no SDK can read (levels)
BACKGROUND_MS = 60_000                     # a write seen this long before an act is the page's own traffic
# The horizon: a verdict after an act waits for the act's own consequences (README "The horizon")
HORIZON_CAP_MS = 3000                      # at most this long beyond the first look; past it, what was pending is named
HORIZON_QUIET_MS = 200                     # after the last answer, message or document the act caused, the render
HORIZON_CHURN_MS = 100                     # ... and the DOM quiet this long (checked for 1 s after that answer)
SOCKET_REPLY_WAIT_MS = 2000                # a socket message the act sent waits this long for the next message in
STREAM_QUIET_MS = 300                      # a stream the act opened has ended, or sent nothing for this long
HYDRATE_WAIT_MS = 5000                     # reticle_open and reticle_navigate wait this long for hydration
HYDRATE_ACT_MS = 3000                      # ... and an act this long, at most (the SDK's own bound is the same)
SCAN_WAIT_MS = 1500                        # a new page's report of what it shows (ui.scan) is awaited this long
ACT_GRACE_MS = 100                         # an assert right after an act waits this long for the act's first requests
EVENT_CAP_COUNT = 2000
EVENT_CAP_AGE_MS = 60_000
EVENT_CAP_BYTES = 8 * 1024 * 1024
PLAIN_EVENT_BYTES = 1024  # a frame of events averaging more is sized event by event (_TabIntake._ingest_plain)
EVENTS_PER_SECOND_DEFAULT = 20_000         # per browser session, then sampling
THROTTLED_AFTER_MS = 12_000
MAX_STRING_ARG = 64 * 1024
FLOW_MAX_STEPS = 100                       # steps in a flow file, and in reticle_flow_save's `steps`
# Hardening limits (SECURITY.md lists them all, with the tests that pin them).
MAX_BATCH = 64                             # messages in one JSON-RPC batch; a longer one is -32600
FRAME_BYTES_PER_TAB_S = 1 << 20            # frame bytes one tab may have parsed per second (RETICLE_TAB_BYTES_PER_S)
FRAME_BYTES_ALL_TABS_S = 4 << 20           # the same for all tabs together (RETICLE_ALL_TABS_BYTES_PER_S)
SESSIONLESS_SCALE = 5.0                    # all clients without a session share 5 x RETICLE_RATE_LIMIT
SESSIONLESS_TARPIT_S = 0.25                # ... and a 429 of that shared bucket is answered this late
BULK_BODY_AFTER = 64 << 10                 # body bytes a request may send before they count as bulk
BULK_BODY_BYTES_S = 4 << 20                # bulk body bytes read per second, all clients together
MAX_SSE_STREAMS = 64                       # held-open event streams (GET /mcp/sse and GET /mcp) at once
MAX_HTTP_CONNECTIONS = 1024                # open client connections; more are closed at once (fewer if fds are few)
MAX_BATCH_REPLY_BYTES = 8 * 1024 * 1024    # a batch's replies together; the rest are -32600 beyond it
MAX_JSON_DEPTH = 64                        # nesting of an MCP message; deeper is a -32700 parse error
HEADER_TIMEOUT_S = 10.0                    # request headers (and an idle keep-alive) must arrive in this
SESSION_MAX_AGE_S = 30 * 86400             # a Streamable HTTP session id older than this answers 404
MIN_TOKEN_CHARS = 32                       # the shortest RETICLE_TOKEN accepted off loopback
AUTH_FAIL_RATE = (1.0, 10.0)               # wrong tokens per peer address: burst 10, then 1/s; 429 beyond


# Server truth: the mark a tab's requests carry, and how long a verdict waits for the server's record of one
SERVER_MARK_HEADER = "X-Reticle-Mark"       # on a tab's same-origin fetch and XHR
SERVER_MARK_COOKIE = "__reticle_mark"       # on a document request (a form post, a link)
SERVER_GRACE_MS = 400                      # a request's record may come this long after the browser saw it answered
SERVER_WAIT_CAP_MS = 3000                  # after an act, a verdict waits at most this long past an answer for it
OTEL_GRACE_MS = 1500                       # SERVER_GRACE_MS once spans reach the daemon (exporters batch them)
OTEL_LOG_WAIT_MS = 1200                    # a record of a service that exports its logs is judged once this old: an
                                           # ERROR log under it comes in the logs' own batch (1 s by default)
TIE_SETTLE_MS = 400                        # a record tied by time (tying.py) is judged once this long old: a rival
                                           # in the next export batch, or the word of another tab's post, withdraws it
# Storage truth: the app's store watched read-only while a tab acts (README "Server truth", SECURITY.md)
STORE_POLL_MS = 100                        # a watched store is read this often while a tab acts (never otherwise)
STORE_LINGER_MS = 1500                     # ... and this long after an act's verdict (a commit its work makes late)
STORE_ACT_MS = 5000                        # ... and this long after a bare act (reticle_act: no verdict ends it)
STORE_TABLE_ROWS_CAP = 20_000              # rows of one table compared; a bigger table is named, never guessed
STORE_ROWS_CAP = 200_000                   # rows of all a store's tables compared together
STORE_JSON_BYTES_CAP = 16 << 20            # a JSON file store bigger than this is named, not compared
STORE_CHANGES_CAP = 200                    # changes one commit event keeps (the rest are counted)
STORE_MAX = 8                              # stores one daemon watches
STORE_LATE_MS = 500                        # a commit this long after the act's answer is named as written after it
NET_CONFIRM_S = 1.5                        # a page-reported request the browser's record must show within


_log = logging.getLogger("reticle")
_bridge_log = logging.getLogger("reticle.bridge")


def _emit(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields})
