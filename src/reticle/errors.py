"""Errors.

The errors Reticle raises on purpose, each with what went wrong and what to do instead.
"""

from __future__ import annotations

from typing import Any, Optional


class ReticleError(Exception):
    """Base class of every error reticle raises on purpose."""


class ToolError(ReticleError):
    """A tool ran and failed: becomes ``isError: true`` with {error, recovery, code}.  `code` is
    machine-readable (callers branch on it, never on the prose); each subclass has its own."""

    code = "tool_failed"

    def __init__(self, error: str, recovery: str = "", code: Optional[str] = None, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.recovery = recovery
        if code is not None:
            self.code = code
        self.extra = extra

    def payload(self) -> dict:
        out = {"error": self.error, "code": self.code}
        if self.recovery:
            out["recovery"] = self.recovery
        out.update(self.extra)
        return out


class RpcError(ReticleError):
    """A JSON-RPC error answered to the client (code, message, data)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def payload(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class _HttpRefusal(ReticleError):
    """An HTTP refusal answered as JSON {error, detail} with a status code."""

    def __init__(self, status: int, error: str, detail: str, headers: Optional[dict] = None) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.headers = headers or {}


class ConfigError(ReticleError):
    """Bad configuration: the daemon refuses to start with one sentence."""
