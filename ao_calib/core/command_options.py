"""The shared shell of the commands beside ``ao_calib.run`` (``ao_calib.eval``, ``export``, ``score``, ``report``,
``plot``). Each command's options are a dataclass of ``ao_calib.core.settings`` fields (default, help, allowed values),
typed in as ``key=value``; ``report`` and ``plot`` also take their path as a bare word and ``--key VALUE``.

Every option is checked before the command does any work: a misspelt key, a value of the wrong type or out of range
is refused in one line naming the key, with exit status 2. ``--help`` lists every option with its default, the values
it allows and what it does. A config or data error met later is also one line on stderr with exit status 2.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import textwrap
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ao_calib.core.command_names import command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import ALLOWED, help_of, is_optional, shown_default, type_hints

HELP_WORDS = ("-h", "--help", "help")


@dataclass(frozen=True)
class Command:
    """One command: its options' schema and how its words are read."""

    module: str  # what users type after ``python -m`` (ao_calib.<name>; ``ao-calib <name>`` through the script)
    options: type  # a dataclass of ``ao_calib.core.settings.setting`` fields
    synopsis: str  # the usage line after the module
    about: str  # what the command does, a paragraph
    examples: tuple[str, ...] = ()
    positional: str | None = None  # the option a bare word (a path) sets
    flags: bool = False  # also ``--key VALUE`` and ``--key=VALUE``
    passes_on: Callable[[str], bool] | None = None  # words handed on to the command as they are (config overrides)
    passed_help: tuple[tuple[str, str], ...] = ()  # (form, help) lines --help lists for the words passed on

    # ------------------------------------------------------------------------------------------------ help

    def usage(self) -> str:
        lines = [f"usage: {self.typed()} {self.synopsis}", "", *textwrap.wrap(self.about, 118), "",
                 "options (key=value" + (f"; {self.positional} also as a bare word" if self.positional else "")
                 + ("; --key VALUE too" if self.flags else "") + "):",
                 f"  {'option':<20} {'default':<11} what it does"]
        for field in dataclasses.fields(self.options):
            lines += _wrapped(field.name, shown_default(field), self._help_line(field))
        for form, text in self.passed_help:
            lines += _wrapped(form, "", text)
        if self.examples:
            lines += ["", "examples:", *(f"  {self.typed()} {e}" for e in self.examples)]
        return "\n".join(lines)

    def typed(self) -> str:
        """The command as its user types it (``ao_calib.core.command_names``)."""
        return command(self.module.removeprefix("ao_calib."))

    def _help_line(self, field: dataclasses.Field) -> str:
        allowed = allowed_text(self.options, field)
        return help_of(self.options, field.name) + (f" Allowed: {allowed}." if allowed else "")

    def names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.options)]

    # ------------------------------------------------------------------------------------------------ parsing

    def parse(self, argv: Sequence[str]) -> tuple[Any, list[str]]:
        """``(options, words passed on)``; refuses an unknown key, a repeated one, a missing required one and a value
        of the wrong type or out of range, naming the key."""
        given: dict[str, str] = {}
        passed: list[str] = []
        for word in self._key_value_words(list(argv)):
            key, sep, value = word.partition("=")
            if self.passes_on is not None and self.passes_on(word):
                passed.append(word)
                continue
            if not sep:
                raise AOCalibError(f"{word}: expected key=value; options: {', '.join(self.names())}")
            if key not in self.names():
                raise AOCalibError(f"{key}: no such option of {self.typed()}; options: "
                                   f"{', '.join(self.names())} (--help says what each does)")
            if key in given:
                raise AOCalibError(f"{key}= given twice ({key}={given[key]} and {key}={value})")
            given[key] = value
        missing = [f.name for f in dataclasses.fields(self.options) if _required(f) and f.name not in given]
        if missing:
            raise AOCalibError(f"{' and '.join(k + '=' for k in missing)} required: {self.typed()} "
                               f"{self.synopsis} (--help lists the options)")
        return self._build(given), passed

    def _key_value_words(self, argv: list[str]) -> list[str]:
        """``--key VALUE`` / ``--key=VALUE`` (with ``flags``) and a bare path (with ``positional``) as ``key=value``."""
        words = []
        while argv:
            word = argv.pop(0)
            if self.flags and word.startswith("--"):
                key, sep, value = word[2:].partition("=")
                if not sep:
                    if not argv:
                        raise AOCalibError(f"{word}: expected a value after it (or {key}=VALUE)")
                    value = argv.pop(0)
                words.append(f"{key.replace('-', '_')}={value}")
            elif self.positional and self._is_bare_path(word):
                words.append(f"{self.positional}={word}")
            else:
                words.append(word)
        return words

    def _is_bare_path(self, word: str) -> bool:
        """A word that is no ``key=`` of this command: a path (one may hold ``=``: a sweep's job folders do)."""
        key, sep, _ = word.partition("=")
        if word.startswith("-") or (self.passes_on is not None and self.passes_on(word)):
            return False
        return not sep or (key not in self.names() and ("/" in key or Path(word).exists()))

    def _build(self, given: dict[str, str]) -> Any:
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        node = OmegaConf.structured(self.options)
        for key, value in given.items():
            if not value.strip():
                raise AOCalibError(f"{key}=: give it a value" + (" (or null)" if self._nullable(key) else ""))
            try:
                node = OmegaConf.merge(node, OmegaConf.from_dotlist([f"{key}={value}"]))
            except OmegaConfBaseException:
                raise AOCalibError(f"{key}={value}: expected {expected_text(self.options, key)}") from None
        try:
            return OmegaConf.to_object(node)  # the schema's own checks (ranges, forms) run here, naming the key
        except OmegaConfBaseException as exc:
            raise AOCalibError(f"{getattr(exc, 'full_key', '') or 'options'}: {str(exc).splitlines()[0]}") from None
        except ValueError as exc:
            raise AOCalibError(str(exc)) from None

    def _nullable(self, key: str) -> bool:
        return is_optional(type_hints(self.options)[key])

    # ------------------------------------------------------------------------------------------------ running

    def main(self, argv: Sequence[str] | None, action: Callable[[Any, list[str]], object]) -> int:
        """Runs ``action(options, words passed on)``; ``--help`` prints the usage; an ``AOCalibError`` (every option
        error among them) is one line on stderr and exit status 2."""
        argv = list(sys.argv[1:] if argv is None else argv)
        if any(a in HELP_WORDS for a in argv):
            print(self.usage())
            return 0
        try:
            options, passed = self.parse(argv)
            logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(name)s: %(message)s")
            result = action(options, passed)
        except AOCalibError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return result if isinstance(result, int) else 0


# ---------------------------------------------------------------------------------------------------- texts


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _enum_of(hint: Any) -> type[Enum] | None:
    candidates = [hint, *typing.get_args(hint)]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, Enum)), None)


def allowed_text(schema: type, field: dataclasses.Field) -> str:
    """The values a field allows, as --help states them: its ``allowed`` rule, or an enum's every value."""
    hint = type_hints(schema)[field.name]
    rule = field.metadata.get(ALLOWED)
    enum = _enum_of(hint)
    if rule is not None:
        text = rule.describe()
    elif enum is not None:
        text = "one of " + ", ".join(str(member.value) for member in enum)
    else:
        return ""
    return text + (" or null" if is_optional(hint) else "")


def expected_text(schema: type, key: str) -> str:
    """What a value of the field must look like, for the message refusing one that does not."""
    hint = type_hints(schema)[key]
    enum = _enum_of(hint)
    base = next((c for c in (hint, *typing.get_args(hint)) if c in (bool, int, float, str)), None)
    text = ("one of " + ", ".join(str(m.value) for m in enum) if enum is not None else
            {bool: "true or false", int: "a whole number", float: "a number", str: "text"}.get(base, "a value"))
    return text + (" (or null)" if is_optional(hint) else "")


def _wrapped(name: str, default: str, text: str) -> list[str]:
    head = f"  {name:<20} {default:<11} "
    if len(name) > 20 or len(default) > 11:
        head = f"  {name} {default} "
    return textwrap.wrap(text, 118, initial_indent=head, subsequent_indent=" " * 35) or [head.rstrip()]
