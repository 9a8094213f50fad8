"""The `grid` command line: a Typer app whose group catches every refusal in one place.

Commands register here; each noun gets its own sub-app (`grid lab ...` now; allocator, node and
test later). `GuardedGroup.invoke` wraps every command and sub-command, so a `GridError` raised
anywhere prints its code, path, fix and next command on stderr and exits 2, and any other
exception exits 1 without a traceback unless GRID_DEBUG=1.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from grid import __version__
from grid.cli import allocator_cmd, lab_cmd, node_cmd, plan_cmd, reconcile_cmd, server_cmd, test_cmd
from grid.cli.capacity_cmd import capacity_app
from grid.cli.demo_cmd import register as register_demo
from grid.cli.errors import report_grid_error, report_unexpected
from grid.cli.scenario_cmd import register as register_scenario
from grid.fleet.errors import GridError

# Typer's own control flow (exit codes, aborts, usage errors) must pass through untouched.
_PASS_THROUGH = (typer.Exit, typer.Abort, typer.TyperException)


class GuardedGroup(TyperGroup):
    """A command group that turns exceptions into the CLI's error format and exit codes."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except GridError as err:
            raise typer.Exit(report_grid_error(err)) from None
        except Exception as exc:
            raise typer.Exit(report_unexpected(exc)) from None


app = typer.Typer(
    name="grid",
    cls=GuardedGroup,
    help="Grid: a fleet model allocator. Plans which models run where, and explains why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"grid {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Grid: a fleet model allocator. Plans which models run where, and explains why."""


app.command("plan")(plan_cmd.plan)
app.command("validate")(plan_cmd.validate)
app.command("reconcile")(reconcile_cmd.reconcile)
app.command("up")(server_cmd.up)
app.command("down")(server_cmd.down)
allocator_cmd.allocator_app.add_typer(node_cmd.node_app, name="node")
app.add_typer(allocator_cmd.allocator_app, name="allocator")
register_scenario(test_cmd.test_app)
register_demo(test_cmd.test_app)
app.add_typer(test_cmd.test_app, name="test")
app.add_typer(lab_cmd.lab_app, name="lab")
app.add_typer(capacity_app, name="capacity")


def main() -> None:
    """Console-script entry point (`grid`), also used by `python -m grid`."""
    app(prog_name="grid")


if __name__ == "__main__":
    main()
