"""The CLI as the lead wires it: `allocator` sub-app plus `up`/`down` on a guarded root group."""

from __future__ import annotations

import typer

from grid.cli import allocator_cmd, server_cmd
from grid.cli.main import GuardedGroup

app = typer.Typer(cls=GuardedGroup, no_args_is_help=True, pretty_exceptions_enable=False)
app.command("up")(server_cmd.up)
app.command("down")(server_cmd.down)
app.add_typer(allocator_cmd.allocator_app, name="allocator")

if __name__ == "__main__":
    app(prog_name="grid")
