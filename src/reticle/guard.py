"""Guard.

The two-tier authorization of DESIGN section 5 (loopback and origin, then the token or a signed
session) and the rate limiter.
"""

from __future__ import annotations

import hmac
import time
from typing import Any, Dict, List, Optional, Protocol, Tuple

from .constants import AUTH_FAIL_RATE
from .errors import _HttpRefusal
from .util import _is_loopback_host, _normalise_origin, _origin_host, _origin_of, _short, _split_host_header


class _GuardHost(Protocol):
    """What the guard asks of the daemon (the Hub): its pairing token and the origins allowed besides
    loopback."""

    @property
    def allowed_origins(self) -> Tuple[str, ...]: ...

    def token(self) -> str: ...


class _Guard:
    """The two-tier authorization of DESIGN section 5, for every route."""

    def __init__(self, hub: _GuardHost) -> None:
        self.hub = hub
        self.failures = _RateLimiter(*AUTH_FAIL_RATE)  # wrong tokens, per peer address

    def presented_token(self, request: Any) -> Optional[str]:
        scheme, _, value = request.headers.get("Authorization", "").strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():  # auth schemes are case-insensitive (RFC 9110)
            return value.strip()
        values = request.query_arguments.get("token")
        if values:
            return values[-1].decode("utf-8", "replace")
        return None

    def token_attempt(self, peer: str, presented: Optional[str]) -> bool:
        """token_ok, with wrong guesses limited per `peer` (_guess_key: the address, and the page of a
        browser) (AUTH_FAIL_RATE).

        Raises a 429 refusal while the peer is over its budget of wrong
        guesses, whatever it presents, so the token cannot be brute-forced."""
        if not presented:
            return False  # nothing guessed: the loopback tier still decides
        wait = self.failures.peek(peer)
        if wait is not None:
            raise _HttpRefusal(429, "too many wrong tokens",
                               "this address presented too many wrong tokens (more than %g, then %g/s); retry "
                               "after %.2f s" % (self.failures.burst, self.failures.rate, wait),
                               {"Retry-After": str(max(1, int(wait + 0.999)))})
        if self.token_ok(presented):
            return True
        self.failures.check(peer)
        return False

    def token_ok(self, presented: Optional[str]) -> bool:
        expected = self.hub.token()
        if not presented or not expected:
            return False
        a = presented.encode("utf-8")
        b = expected.encode("utf-8")
        return len(a) == len(b) and hmac.compare_digest(a, b)

    def loopback_problem(self, request: Any, allowed_origins: Tuple[str, ...] = (),
                         unnamed_pages: bool = False) -> Optional[str]:
        """None when the loopback tier holds, else what failed, in words.  unnamed_pages: a browser
        request that names no page (no Origin, no Referer: a Referrer-Policy such as Django's default
        `same-origin` on a page of another port) passes; only /reticle.js, which holds no secret."""
        peer = request.remote_ip or ""
        if not _is_loopback_host(peer):
            return "the peer address %s is not loopback" % peer
        raw_host = request.headers.get("Host")
        host = _split_host_header(raw_host)
        if not _is_loopback_host(host):
            return ("the Host header %s does not name a loopback host"
                    % (repr(raw_host) if raw_host else "is missing and"))
        for name in ("Origin", "Referer"):
            value = request.headers.get(name)
            if value is None:
                continue
            if allowed_origins and _normalise_origin(value) in allowed_origins:
                continue
            if not _is_loopback_host(_origin_host(value)):
                return "the %s header %r is not a loopback page" % (name, value)
        site = (request.headers.get("Sec-Fetch-Site") or "").strip().lower()
        if not unnamed_pages and site in ("cross-site", "same-site") and request.headers.get("Origin") is None and \
                request.headers.get("Referer") is None:
            # a browser says where a request comes from even when the page withholds Origin and
            # Referer (referrerpolicy="no-referrer"): a page of another site, unnamed, is not a loopback page
            return "a %s browser request with no Origin and no Referer is not from a known loopback page" % site
        return None

    def check_http(self, request: Any, allowed_origins: Tuple[str, ...] = (), unnamed_pages: bool = False) -> None:
        problem = self.loopback_problem(request, allowed_origins, unnamed_pages)
        if problem is None:
            return
        presented = self.presented_token(request)
        if self.token_attempt(_guess_key(request), presented):
            return
        detail = "%s; requests that are not from a loopback client with loopback Host and Origin " \
                 "need the pairing token (Authorization: Bearer <token> or ?token=)" % problem
        if presented:
            detail = "the presented token is wrong, and " + detail
        raise _HttpRefusal(403, "forbidden", detail)

    def ws_origin_allowed(self, origin: Optional[str]) -> bool:
        if origin is None:
            return True  # no Origin: not a browser page; the hello must carry the token
        if _normalise_origin(origin) in self.hub.allowed_origins:
            return True
        return _is_loopback_host(_origin_host(origin))


def _guess_key(request: Any) -> str:
    """Whose wrong token guesses a request counts as: its peer address and, for a browser, the page
    that sent it (its Origin, else what Sec-Fetch-Site says).  Every local browser is 127.0.0.1:
    a hostile page's wrong guesses must lock out that page, not the right token of everyone else."""
    peer = request.remote_ip or ""
    origin = request.headers.get("Origin")
    if origin is not None:
        return "%s|page %s" % (peer, _short(origin, 200))
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        referer = request.headers.get("Referer")
        return "%s|browser %s %s" % (peer, _short(site, 20), _origin_of(referer) if referer else "")
    return "%s|client" % peer


class _RateLimiter:
    """Token bucket per session key."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: Dict[str, List[float]] = {}

    def check(self, key: str, cost: float = 1.0, scale: float = 1.0) -> Optional[float]:
        """None when `cost` requests are allowed now (and counted), else the
        seconds until they would be (and nothing is counted).  `scale` multiplies
        the rate and the burst (a bucket shared by many clients)."""
        now = time.monotonic()
        rate, burst = self.rate * scale, self.burst * scale
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) > 10000:
                self._buckets.clear()
            bucket = self._buckets[key] = [burst, now]
        tokens = min(burst, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        need = min(cost, burst)  # a cost above the burst runs into debt rather than never
        if tokens >= need:
            bucket[0] = tokens - cost
            return None
        bucket[0] = tokens
        return (need - tokens) / rate

    def peek(self, key: str) -> Optional[float]:
        """None when one request would be allowed now, else the wait; counts nothing."""
        bucket = self._buckets.get(key)
        if bucket is None:
            return None
        tokens = min(self.burst, bucket[0] + (time.monotonic() - bucket[1]) * self.rate)
        return None if tokens >= 1.0 else (1.0 - tokens) / self.rate
