"""The error every contract check raises."""

from __future__ import annotations

__all__ = ["ContractError"]


class ContractError(ValueError):
    """A model file whose metadata or graph does not satisfy the contract (CONTRACT.md)."""
