"""Shadow rules: every answered filter and prioritize call decided again by a second rule book, and compared
(`controller.Shadow`)."""

from __future__ import annotations

from rulesched.controllers.shadow.controller import Shadow

__all__ = ["Shadow"]
