"""``status``'s live part: what the engine running on the journal says of itself.

The journal holds what was committed; the running engine alone knows its per-handler limits
(they are registration-time code, never written to the journal), how many attempts run now and
how many due timers wait for a slot, a token or (cluster scope) the handler's row. ``status``
asks the engine through its admin socket (``Engine(..., admin=True)``) and shows that beside the
journal's figures. No engine answering is not an error: ``status`` says so and shows the journal
alone. A socket that answers wrongly (or is not the engine's: :mod:`wheel_engine.admin.client`
checks its owner and refuses links) is not an error either: ``status`` still reads the journal,
and names the refusal.
"""

from __future__ import annotations

from typing import Any

from wheel_engine.cli.output import CliError, Output
from wheel_engine.cli.remote import via_admin

__all__ = ["ask_engine", "print_live"]

#: The columns of the limits table, and the key of ``stats()["limits"][name]`` each shows.
LIMIT_COLUMNS = (
    ("concurrency", "concurrency"),
    ("rate/s", "rate"),
    ("burst", "burst"),
    ("scope", "scope"),
    ("running", "running"),
    ("waiting for a slot", "waiting_slot"),
    ("waiting for a token", "waiting_token"),
    ("waiting for the row", "waiting_row"),  # cluster scope: another node's claim held it
    ("throttled", "throttled"),
)


def ask_engine(db: str) -> dict[str, Any]:
    """The live part of ``status --json``: ``{"engine": None | {...}, "engine_problem": ...}``.

    ``engine`` holds the answering engine's pid, version and ``stats()`` (its limits among
    them); None when no engine serves the socket, or when it refused (``engine_problem`` then
    names why, in one line)."""
    try:
        answer = via_admin(db, "status")
    except CliError as exc:
        return {"engine": None, "engine_problem": str(exc)}
    if answer is None:
        return {"engine": None, "engine_problem": None}
    return {
        "engine": {
            "pid": answer.get("pid"),
            "wheel_engine": answer.get("wheel_engine"),
            "stats": answer.get("stats", {}),
        },
        "engine_problem": None,
    }


def print_live(out: Output, live: dict[str, Any]) -> None:
    """The engine line after the journal's fields, then one row per limited handler."""
    engine = live["engine"]
    if engine is None:
        problem = live["engine_problem"]
        if problem is None:
            out.note(
                "no engine answers on the admin socket: the live figures (running, limits) "
                "need an engine started with admin=True"
            )
        else:
            out.note(f"the admin socket did not answer as an engine: {problem}")
        return
    stats = engine["stats"]
    out.line()
    out.fields(
        [
            ("engine", f"running, pid {engine['pid']} (wheel-engine {engine['wheel_engine']})"),
            ("running now", stats.get("running", 0)),
            ("throttled", f"{stats.get('throttled', 0)} (due timers held back by a limit)"),
        ]
    )
    limits: dict[str, dict[str, Any]] = stats.get("limits", {})
    if not limits:
        out.line("no handler has a limit (register(..., concurrency=, rate=))")
        return
    out.line()
    out.table(
        ["limited handler", *[title for title, _ in LIMIT_COLUMNS]],
        [
            [name, *[_shown(figures.get(field)) for _, field in LIMIT_COLUMNS]]
            for name, figures in limits.items()
        ],
        right=[title for title, field in LIMIT_COLUMNS if field != "scope"],
    )


def _shown(value: Any) -> Any:
    return "-" if value is None else value
