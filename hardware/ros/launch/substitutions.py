"""Substitutions: the ``$(name args...)`` templates of launch attributes, parsed and evaluated.

Every value is bounded (``LaunchLimits``): nesting of ``$(...)``, the length of one value, and the
characters produced in all, so that a ``<let>`` doubling itself 40 times is refused at 128 KiB
instead of reaching a terabyte (issue 15).
"""

from __future__ import annotations

import secrets
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from robolearn.hardware.ros.launch.limits import LaunchLimits
from robolearn.hardware.ros.launch.packages import package_prefix, package_share
from robolearn.hardware.ros.launch.plan import LaunchError, brief

_TRUE, _FALSE = ("true", "1"), ("false", "0")
_SUPPORTED = (
    "var, env, optenv, find-pkg-share, find-pkg-prefix, find-exec, dirname, filename, anon, not, and, "
    "or, any, all, equals"
)


@dataclass(frozen=True)
class Sub:
    """``$(name arg arg ...)``; each argument is itself a template."""

    name: str
    args: tuple[tuple[str | Sub, ...], ...]


Template = tuple[str | Sub, ...]


@dataclass
class Scope:
    """What actions and substitutions see: launch configurations, the processes' environment, the
    current file. An include shares its includer's dictionaries; a scoped group copies them."""

    configs: dict[str, str]
    env: dict[str, str]
    file: Path

    def copy(self) -> Scope:
        return Scope(dict(self.configs), dict(self.env), self.file)


class TemplateParser:
    """Parses launch's substitution syntax: text with ``$(name args...)``, arguments split by spaces,
    quoted with ' or " to hold spaces, and nesting (at most ``max_depth`` deep: the parser recurses)."""

    def __init__(self, text: str, source: str, max_depth: int) -> None:
        self.text = text
        self.source = source
        self.max_depth = max_depth
        self.depth = 0
        self.i = 0

    def template(self) -> Template:
        parts = self._parts(stop="")
        if self.i != len(self.text):
            raise LaunchError(f"{self.source}: unexpected {self.text[self.i]!r} in {brief(self.text)!r}")
        return parts

    def _parts(self, stop: str) -> Template:
        parts: list[str | Sub] = []
        text: list[str] = []
        while self.i < len(self.text) and self.text[self.i] not in stop:
            if self.text.startswith("$(", self.i):
                if text:
                    parts.append("".join(text))
                    text = []
                parts.append(self._substitution())
            else:
                text.append(self.text[self.i])
                self.i += 1
        if text:
            parts.append("".join(text))
        return tuple(parts)

    def _substitution(self) -> Sub:
        self.depth += 1
        if self.depth > self.max_depth:
            raise LaunchError(
                f"{self.source}: substitutions nested deeper than {self.max_depth} levels in "
                f"{brief(self.text)!r} (limit {self.max_depth})"
            )
        self.i += 2
        start = self.i
        while self.i < len(self.text) and (self.text[self.i].isalnum() or self.text[self.i] in "_-"):
            self.i += 1
        name = self.text[start : self.i]
        if not name:
            raise LaunchError(
                f"{self.source}: a substitution needs a name after '$(' in {brief(self.text)!r}"
            )
        args: list[Template] = []
        while self.i < len(self.text) and self.text[self.i] == " ":
            self.i += 1
            if self.i < len(self.text) and self.text[self.i] in "'\"":
                quote = self.text[self.i]
                self.i += 1
                args.append(self._parts(stop=quote))
                self._expect(quote)
            elif self.i < len(self.text) and self.text[self.i] not in " )":
                args.append(self._parts(stop=" )"))
        self._expect(")")
        self.depth -= 1
        return Sub(name, tuple(args))

    def _expect(self, char: str) -> None:
        if self.i >= len(self.text) or self.text[self.i] != char:
            raise LaunchError(f"{self.source}: missing {char!r} in {brief(self.text)!r}")
        self.i += 1


def truth(text: str, what: str) -> bool:
    """launch's condition rule: 'true'/'1' and 'false'/'0', any case, nothing else."""
    value = text.strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise LaunchError(f"{what} is {brief(text)!r}; a condition must be true, false, 1 or 0")


class Substitutions:
    """Evaluates templates in a scope; one per launch (``$(anon)`` names and the budget are shared)."""

    def __init__(self, limits: LaunchLimits) -> None:
        self.limits = limits
        self.anon: dict[str, str] = {}
        self.expanded = 0
        """Characters evaluated so far, against ``limits.max_expanded_chars``."""

    def text(self, template: str | None, scope: Scope) -> str:
        return "" if template is None else self._eval(self._parse(template, scope), scope)

    def _parse(self, template: str, scope: Scope) -> Template:
        return TemplateParser(template, scope.file.name, self.limits.max_depth).template()

    def _bounded(self, value: str, scope: Scope, source: str | Template) -> str:
        """``value``, once it is known to fit one value's and the launch's limits; ``source`` is what
        it was evaluated from (written out only for a message)."""
        self.expanded += len(value)
        if len(value) <= self.limits.max_value_chars and self.expanded <= self.limits.max_expanded_chars:
            return value
        what = brief(source if isinstance(source, str) else _show(source))
        if len(value) > self.limits.max_value_chars:
            raise LaunchError(
                f"{scope.file.name}: {what!r} expands to more than {self.limits.max_value_chars} "
                "characters (limit for one value)"
            )
        raise LaunchError(
            f"{scope.file.name}: values expand to more than {self.limits.max_expanded_chars} "
            f"characters in all, at {what!r} (limit for one launch)"
        )

    def _eval(self, template: Template, scope: Scope) -> str:
        value = "".join(p if isinstance(p, str) else self._sub(p, scope) for p in template)
        return self._bounded(value, scope, template)

    def _sub(self, sub: Sub, scope: Scope) -> str:
        return self._bounded(self._evaluate(sub, scope), scope, (sub,))

    def _evaluate(self, sub: Sub, scope: Scope) -> str:
        args = [self._eval(a, scope) for a in sub.args]
        where = f"{scope.file.name}: $({sub.name}{''.join(' ' + brief(a) for a in args)})"

        def arity(*allowed: int) -> None:
            if len(args) not in allowed:
                raise LaunchError(f"{where} takes {' or '.join(map(str, allowed))} argument(s)")

        if sub.name == "var":
            arity(1, 2)
            if args[0] in scope.configs:
                return scope.configs[args[0]]
            if len(args) == 2:
                return args[1]
            known = ", ".join(sorted(k for k in scope.configs if k != "ros_namespace")) or "none"
            raise LaunchError(
                f"{where}: no launch argument or <let> named '{brief(args[0])}' (set: {brief(known, 400)})"
            )
        if sub.name in ("env", "optenv"):
            arity(1, 2)
            if args[0] in scope.env:
                return scope.env[args[0]]
            if len(args) == 2 or sub.name == "optenv":
                return args[1] if len(args) == 2 else ""
            raise LaunchError(f"{where}: environment variable {brief(args[0])} is not set and has no default")
        if sub.name == "find-pkg-share":
            arity(1)
            return str(package_share(args[0], scope.env))
        if sub.name == "find-pkg-prefix":
            arity(1)
            return str(package_prefix(args[0], scope.env))
        if sub.name == "find-exec":
            arity(1)
            found = shutil.which(args[0], path=scope.env.get("PATH"))
            if found is None:
                raise LaunchError(f"{where}: no executable {brief(args[0])} on PATH")
            return found
        if sub.name in ("dirname", "filename"):
            arity(0)
            return str(scope.file.parent if sub.name == "dirname" else scope.file)
        if sub.name == "anon":
            arity(1)
            return self.anon.setdefault(args[0], f"{args[0]}_{secrets.token_hex(4)}")
        if sub.name == "not":
            arity(1)
            return str(not truth(args[0], where)).lower()
        if sub.name in ("and", "or"):
            arity(2)
            a, b = (truth(x, where) for x in args)
            return str(a and b if sub.name == "and" else a or b).lower()
        if sub.name in ("any", "all"):
            truths = [truth(x, where) for x in args]
            return str(any(truths) if sub.name == "any" else all(truths)).lower()
        if sub.name == "equals":
            arity(2)
            return str(args[0] == args[1]).lower()
        raise LaunchError(
            f"{where}: substitution '{brief(sub.name)}' is not supported by robolearn launch "
            f"(supported: {_SUPPORTED})"
        )

    def cmdline(self, template: str, scope: Scope) -> list[str]:
        """Split a command line as ``ExecuteProcess`` does: literal text splits on spaces (shell
        quoting rules), a substitution's value never does."""
        words: list[str] = []
        current: list[str] | None = None

        def finish(word: list[str]) -> None:
            words.append(self._bounded("".join(word), scope, template))

        for part in self._parse(template, scope):
            if isinstance(part, Sub):
                current = [*(current or []), self._sub(part, scope)]
                continue
            try:
                tokens = shlex.split(part)
            except ValueError as exc:
                raise LaunchError(f"{scope.file.name}: cannot split {brief(template)!r}: {exc}") from None
            if not tokens:
                if current is not None:
                    finish(current)
                current = None
                continue
            if part[0].isspace() and current is not None:
                finish(current)
                current = None
            first, *rest = tokens
            current = [*(current or []), first]
            if rest:
                finish(current)
                words += rest[:-1]
                current = [rest[-1]]
            if part[-1].isspace():
                finish(current)
                current = None
        if current is not None:
            finish(current)
        return words


def _show(template: Template) -> str:
    """A template written back as it appears in the file, for messages."""
    return "".join(
        p if isinstance(p, str) else f"$({p.name}{''.join(' ' + _show(a) for a in p.args)})" for p in template
    )
