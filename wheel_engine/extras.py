"""How to install an optional extra, said the same way by every module that needs one.

There is no published release yet, so the install from a checkout comes first and the
package-index form second.
"""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """The command that installs the extra ``extra`` (``metrics``, ``postgres``, ``web``)."""
    return (
        f"pip install -e '.[{extra}]' in a checkout of wheel-engine "
        f"(once released: pip install 'wheel-engine[{extra}]')"
    )
