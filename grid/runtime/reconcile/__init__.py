"""Pure reconciliation: a solved plan and the actual fleet in, staged safe actions out."""

from grid.runtime.reconcile.core import reconcile, result_document

__all__ = ["reconcile", "result_document"]
