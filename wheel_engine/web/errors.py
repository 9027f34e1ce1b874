"""The one error of the console's routes: a request refused, with the HTTP status that says why."""

from __future__ import annotations

from wheel_engine.errors import WheelEngineError

__all__ = ["Refused"]


class Refused(WheelEngineError):
    """The request is refused; ``status`` and a one-line reason for the page or the API."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
