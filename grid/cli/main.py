"""The `grid` command line: a Typer app whose group catches every refusal in one place.

Commands register here, lazily (`grid.cli.lazy`): a noun's module is imported only when that
noun runs, so `grid --version` and bare `grid` (help, exit 0) load no planner, OR-Tools or scipy.
`GuardedGroup.invoke` wraps every command and sub-command, so a `GridError` raised
anywhere prints its code, path, fix and next command on stderr and exits 2, and any other
exception exits 1 without a traceback unless GRID_DEBUG=1.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from grid import __version__
from grid.cli.errors import report_grid_error, report_unexpected
from grid.cli.hints import ENV_HELP, carry_dirs
from grid.cli.lazy import LazyCommand, LazyGroup, lazy_group
from grid.fleet import GridError

# Typer's own control flow (exit codes, aborts, usage errors) must pass through untouched.
_PASS_THROUGH = (typer.Exit, typer.Abort, typer.TyperException)


class GuardedGroup(LazyGroup):
    """A command group that turns exceptions into the CLI's error format and exit codes."""

    def invoke(self, ctx: Any) -> Any:
        argv = [*getattr(ctx, "_protected_args", []), *ctx.args]  # this command line
        try:
            return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except GridError as err:
            if err.next_command:  # a follow-up talks to the same folders (hints.py)
                err.next_command = carry_dirs(err.next_command, argv)
            raise typer.Exit(report_grid_error(err)) from None
        except Exception as exc:
            raise typer.Exit(report_unexpected(exc)) from None


def test_app() -> typer.Typer:
    """The `test` sub-app with the scenario lab and the demo registered on it (once)."""
    from grid.cli import demo_cmd, scenario_cmd, test_cmd

    names = {c.name for c in test_cmd.test_app.registered_commands}
    if "scenario" not in names:
        scenario_cmd.register(test_cmd.test_app)
    if "demo" not in names:
        demo_cmd.register(test_cmd.test_app)
    return test_cmd.test_app


# `grid allocator node` (the node agent) loads only when used.
_ALLOCATOR_GROUP = lazy_group(
    {
        "node": LazyCommand(
            "grid.cli.external_cmd",
            "node_root_app",
            "Run this machine's allocator node agent and fence it locally.",
        ),
        "enroll": LazyCommand(
            "grid.cli.enroll_cmd", "enroll", "Print a one-time enrollment token for a new host."
        ),
        "key": LazyCommand(
            "grid.cli.key_cmd", "key_app", "Client keys for /v1: create (shown once), list, revoke."
        ),
        "join": LazyCommand(
            "grid.cli.enroll_cmd",
            "join",
            "Enroll this machine with a one-time token and start its node agent.",
        ),
    },
)

ROOT_COMMANDS = {
    "plan": LazyCommand(
        "grid.cli.plan_cmd",
        "plan",
        "Plan which models should run on which hosts. Reads a snapshot; changes nothing.",
    ),
    "validate": LazyCommand(
        "grid.cli.plan_cmd",
        "validate",
        "Check a snapshot against schema v1 and its cross-references; print OK and counts.",
    ),
    "reconcile": LazyCommand(
        "grid.cli.reconcile_cmd",
        "reconcile",
        "Plan a snapshot (or take --plan) and show the staged actions that would converge it.",
    ),
    "up": LazyCommand(
        "grid.cli.server_cmd",
        "up",
        "Start the allocator controller in the background (127.0.0.1:22101 by default).",
    ),
    "down": LazyCommand(
        "grid.cli.server_cmd",
        "down",
        "Stop the local node agent (if it serves this controller), then the controller.",
    ),
    "allocator": LazyCommand(
        "grid.cli.profiles_cmd",
        "allocator_app",
        "Control the fleet allocator: profiles, modes, ticks, status, node credentials.",
        group_cls=_ALLOCATOR_GROUP,
    ),
    "test": LazyCommand(
        "grid.cli.main",
        "test_app",
        "A logical fleet on this machine (controller on port 22100, real llama.cpp), "
        "the scenario lab, the demo.",
        factory=True,
    ),
    "models": LazyCommand(
        "grid.cli.client_cmd", "models", "List model profiles and the models served now."
    ),
    "chat": LazyCommand(
        "grid.cli.client_cmd", "chat", "Chat with a served model through the router (streams)."
    ),
    "lab": LazyCommand(
        "grid.cli.lab_cmd", "lab_app", "Scenario lab: generated fleets, the hindsight oracle."
    ),
    "node": LazyCommand(
        "grid.cli.external_cmd",
        "node_root_app",
        "This machine's node agent (the same as `grid allocator node`), and the external "
        "OpenAI-compatible endpoints Grid does not run.",
    ),
    "capacity": LazyCommand(
        "grid.cli.capacity_cmd",
        "capacity_app",
        "What-if capacity: how many hosts of a template to add, and the N−1 drill.",
    ),
}


class RootGroup(GuardedGroup):
    """`grid` itself: the lazy nouns above; bare `grid` prints its help and exits 0."""

    lazy = ROOT_COMMANDS

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            typer.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)


app = typer.Typer(
    name="grid",
    cls=RootGroup,
    help="Grid: a fleet model allocator. Plans which models run where, and explains why.",
    epilog=ENV_HELP + " README.md has the first steps; docs/snapshot.md the snapshot fields.",
    no_args_is_help=True,
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


# True once `main()` runs: this process is one `grid` command, so a command's time limit
# counts from the process start (plan_cmd.py); `app` invoked in-process (tests) leaves it False.
COMMAND_PROCESS = False


def main() -> None:
    """Console-script entry point (`grid`), also used by `python -m grid`."""
    global COMMAND_PROCESS
    COMMAND_PROCESS = True
    app(prog_name="grid")


if __name__ == "__main__":
    main()
