"""Profile keys from the command line: a one-stage command (`bench sweep`, `bench race`) takes its
section's keys as flags, the section's prefix dropped (``sweep-sizes`` is ``--sizes``), each
checked as the profile's own value would be, beside ``--profile``, ``--protocols``, ``--results``
and ``--quiet-machine``."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, TypeVar, get_origin, get_type_hints

from bench.harness.profile import (
    BullmqWorkerOptions,
    FinishFetchOptions,
    InstructionsOptions,
    Profile,
    RaceOptions,
    SweepOptions,
    load_profile,
    option_key,
    parse_protocols,
    parse_value,
    section_field,
)
from bench.harness.run_folder import add_quiet_machine
from bench.results.files import RESULTS_DIR

Section = TypeVar(
    "Section", FinishFetchOptions, SweepOptions, RaceOptions, BullmqWorkerOptions, InstructionsOptions
)


@dataclass(frozen=True)
class SectionFlags(Generic[Section]):
    """One profile section's keys as command-line flags."""

    section: type[Section]
    prefix: str = ""  # dropped from each key to make its flag
    helps: Mapping[str, str] = field(default_factory=dict)  # by field name, where the default won't do
    only: tuple[str, ...] = ()  # the fields taken as flags, where not all (a stage reading another's)

    def flagged(self) -> list[Field[Any]]:
        return [f for f in fields(self.section) if not self.only or f.name in self.only]

    def flag(self, name: str) -> str:
        return "--" + option_key(name).removeprefix(self.prefix)

    def parser(self, prog: str, description: str) -> argparse.ArgumentParser:
        """``--profile``, a flag for each key of the section, ``--results`` and ``--quiet-machine``."""
        parser = argparse.ArgumentParser(prog=prog, description=description)
        parser.add_argument("--profile", default="default", help="profiles/<name>.conf, or a path")
        hints = get_type_hints(self.section)
        for f in self.flagged():
            key, flag = option_key(f.name), self.flag(f.name)
            text = self.helps.get(f.name, f"the profile's {key}")
            text += ", comma-separated" if get_origin(hints[f.name]) is tuple else ""
            text += f" (overrides {key})" if f.name in self.helps else ""
            metavar = flag.removeprefix("--").upper().replace("-", "_")
            parser.add_argument(flag, dest=f.name, default=None, metavar=metavar, help=text)
        parser.add_argument(
            "--protocols", default=None, metavar="PROTOCOLS", help="the profile's protocols, comma-separated"
        )
        parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders go")
        add_quiet_machine(parser)
        return parser

    def profile(self, args: argparse.Namespace) -> Profile:
        """The profile ``--profile`` names, its section's keys overridden by the flags given, each
        parsed and checked as its profile key is."""
        profile = load_profile(args.profile)
        hints = get_type_hints(self.section)
        given = {
            f.name: parse_value(
                option_key(f.name), hints[f.name], raw, f.metadata.get("min"), flag=self.flag(f.name)
            )
            for f in self.flagged()
            if (raw := getattr(args, f.name, None)) is not None
        }
        attribute = section_field(self.section)
        changes: dict[str, Any] = {attribute: dataclasses.replace(getattr(profile, attribute), **given)}
        if getattr(args, "protocols", None) is not None:
            changes["protocols"] = parse_protocols(args.protocols, flag="--protocols")
        return dataclasses.replace(profile, **changes)
