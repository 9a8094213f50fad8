"""Sub-commands imported only when they run, so `grid --version` and `grid validate` start fast.

A `LazyGroup` lists its lazy sub-commands by name and one-line help without importing them; the
module behind a name is imported the first time that name is resolved (to run it, complete it or
print its own help). Listing the group's help uses the registered line, so `grid --help` imports
no planner, OR-Tools or scipy either. The line registered here is also set as the loaded
command's short help, so both listings read the same.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

try:  # Typer 0.2x vendors its own click; older releases use the click package
    from typer._click import core as click  # type: ignore[attr-defined]
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover
    import click  # type: ignore[no-redef]
    from click import UsageError  # type: ignore[assignment]


@dataclass(frozen=True)
class LazyCommand:
    """A sub-command (a function) or sub-app (a `typer.Typer`) at `module:attr`."""

    module: str
    attr: str
    help: str
    group_cls: type[TyperGroup] | None = None  # for a sub-app with lazy children of its own
    factory: bool = False  # `attr` is a function that returns the sub-app

    def load(self, name: str) -> click.Command:
        target = getattr(importlib.import_module(self.module), self.attr)
        if self.factory:
            target = target()
        holder = typer.Typer(add_completion=False)
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=name, cls=self.group_cls)
        else:  # a lone command would come back bare: a hidden sibling keeps the group
            holder.command(name)(target)
            holder.command("_placeholder", hidden=True)(lambda: None)
        group = typer.main.get_command(holder)
        command: click.Command = group.commands[name]  # type: ignore[attr-defined]
        command.short_help = self.help
        return command


class LazyGroup(TyperGroup):
    """A Typer group whose `lazy` children are imported on first use."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}
    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = list(super().list_commands(ctx))
        return names + [name for name in self.lazy if name not in names]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        known = super().get_command(ctx, cmd_name)
        entry = self.lazy.get(cmd_name)
        if known is not None or entry is None:
            return known
        if self._listing:
            return TyperCommand(cmd_name, help=entry.help, short_help=entry.help)
        command = entry.load(cmd_name)
        self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as err:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches:
                err.message = (
                    err.message.rstrip(".")
                    + ". Did you mean "
                    + (", ".join(repr(m) for m in matches) + "?")
                )
            raise


def lazy_group(children: dict[str, LazyCommand], base: type[TyperGroup] = LazyGroup) -> Any:
    """A LazyGroup subclass with these lazy children (Typer builds groups from a class)."""
    return type("LazyGroup_" + "_".join(children), (base,), {"lazy": dict(children)})


def _flag_type(self: TyperOption, ctx: click.Context) -> str | None:
    """Flags take no value: show no `<bool>` type for them in --help."""
    if self.is_flag and not self.count:
        return None
    return _original_display_type_rich(self, ctx)


_original_display_type_rich = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]
