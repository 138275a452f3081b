"""A click group that imports a subcommand's module only when that command runs or its own
--help is asked (click's documented "lazily loading subcommands" pattern), so that commands
with heavy imports, such as `rqcrawl bench`, cost the others nothing. Unlike the documented
pattern, the group's own --help does not import them either: it lists them by a one-line
help the group holds."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    def __init__(
        self, *args, lazy_subcommands: dict[str, tuple[str, str]] | None = None, **kwargs
    ) -> None:
        """`lazy_subcommands` maps a command's name to ("module:attribute", its one-line help)."""
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = lazy_subcommands or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_subcommands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy_subcommands:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = self.lazy_subcommands[cmd_name][0].partition(":")
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing needs only each command's help: a plain group of the loaded commands and
        help-only stand-ins for the lazy ones writes it, as click would for the real ones."""
        stand_ins = {
            name: click.Command(name, help=text)
            for name, (_, text) in self.lazy_subcommands.items()
        }
        click.Group(commands={**self.commands, **stand_ins}).format_commands(ctx, formatter)
