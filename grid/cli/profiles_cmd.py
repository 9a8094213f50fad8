"""`grid allocator model list` and `grid allocator apply CATALOG`: readable and declarative
model profiles, registered on the allocator sub-app (imported by `grid.cli.main`)."""

from __future__ import annotations

from grid.cli.allocator_cmd import allocator_app

__all__ = ["allocator_app"]
