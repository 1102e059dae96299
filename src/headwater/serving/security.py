"""Moved to `headwater.security`; kept only for `serving.deploy`'s import until it moves."""

from __future__ import annotations

from headwater.security import TOKEN_ENV, check_bind

__all__ = ["TOKEN_ENV", "check_bind"]
