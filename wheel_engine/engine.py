"""Placeholder: the engine is being written."""


class Engine:  # pragma: no cover - replaced by the real engine
    pass
