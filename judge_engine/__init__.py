"""judge-engine: run LLM judges at scale, and measure how far they can be trusted."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
