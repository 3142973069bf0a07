"""Session signing.

Signed session ids (HMAC-SHA256 with the machine key, via cryptography): a session id a client
holds proves it was minted by this daemon, and expires.
"""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Optional

from cryptography.hazmat.primitives import hashes as _c_hashes
from cryptography.hazmat.primitives import hmac as _c_hmac

from .util import _b64url, _b64url_decode


class _SessionSigner:
    """Streamable HTTP session ids: ``v1.<payload>.<mac>`` (DESIGN section 4).

    payload = base64url(16 random bytes + 8-byte issued-at seconds); mac =
    HMAC-SHA256 over ``v1.<payload>`` with the per-machine key.  Verifying
    needs only the key, so ids stay valid across daemon restarts; the daemon
    gives them a maximum age (SESSION_MAX_AGE_S, 30 days), after which they
    answer 404 like an unknown id and the client initializes again.
    """

    VERSION = "v1"

    def __init__(self, key: bytes, max_age_s: Optional[float] = None) -> None:
        if len(key) < 32:
            raise ValueError("the session signing key must be at least 32 bytes")
        self._key = bytes(key)
        self.max_age_s = max_age_s

    def _mac(self, signed: bytes) -> bytes:
        h = _c_hmac.HMAC(self._key, _c_hashes.SHA256())
        h.update(signed)
        return h.finalize()

    def mint(self, now: Optional[float] = None) -> str:
        issued = int(time.time() if now is None else now)
        payload = _b64url(secrets.token_bytes(16) + issued.to_bytes(8, "big"))
        signed = ("%s.%s" % (self.VERSION, payload)).encode("ascii")
        return "%s.%s" % (signed.decode("ascii"), _b64url(self._mac(signed)))

    def verify(self, session_id: Optional[str], now: Optional[float] = None) -> bool:
        if not session_id or len(session_id) > 256:
            return False
        parts = session_id.split(".")
        if len(parts) != 3 or parts[0] != self.VERSION:
            return False
        try:
            payload = _b64url_decode(parts[1])
            mac = _b64url_decode(parts[2])
        except (ValueError, TypeError):
            return False
        if len(payload) != 24 or len(mac) != 32:
            return False
        if _b64url(payload) != parts[1] or _b64url(mac) != parts[2]:
            return False  # reject non-canonical encodings of the same bytes
        if not hmac.compare_digest(self._mac(("%s.%s" % (parts[0], parts[1])).encode("ascii")), mac):
            return False
        if self.max_age_s is not None:
            issued = int.from_bytes(payload[16:], "big")
            age = (time.time() if now is None else now) - issued
            if age > self.max_age_s or age < -86400:  # too old, or from a clock a day ahead
                return False
        return True
