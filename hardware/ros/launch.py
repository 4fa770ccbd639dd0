"""``robolearn launch``: run a ROS 2 launch file (XML or YAML) without the ROS 2 launch library.

Robots and workstations that run the policy often have ``rclpy`` but not ``ros2 launch`` (the
``launch``/``launch_ros`` packages). This module reads the same declarative files that
``ros2 launch`` reads and starts the same processes with the same command lines, so one file in
``launch/`` serves both. It follows ``launch_xml``/``launch_yaml`` and ``launch_ros``:

- actions ``<arg>`` (with ``<choice>``), ``<let>``, ``<node>``, ``<executable>``, ``<include>``
  (with ``<arg>``), ``<group>`` (``scoped``, ``forwarding``, ``<keep>``), ``<push_ros_namespace>``,
  ``<set_env>``, ``<unset_env>``; ``if``/``unless`` on every action;
- substitutions ``var``, ``env``, ``optenv``, ``find-pkg-share``, ``find-pkg-prefix``,
  ``find-exec``, ``dirname``, ``filename``, ``anon``, ``not``, ``and``, ``or``, ``any``, ``all``,
  ``equals``;
- launch configurations behave as in ``launch``: an ``<include>`` shares its includer's, a scoped
  ``<group>`` (the default) gets a copy, and a command-line argument is a configuration set before
  the first action.

A ``<node>`` becomes ``EXE [args] --ros-args [ros_args] -r __node:=NAME -r __ns:=/NS -p k:=v ...
-r from:=to`` as ``launch_ros`` builds it (parameters as ``-p`` rules instead of a temporary YAML
file; both are read with YAML rules). Anything else (Python launch files, unknown tags,
attributes or substitutions) is refused with a message rather than half-supported.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Annotated, Any, TextIO

import tyro
import yaml

PACKAGE = "robolearn"
# Where a source checkout keeps what colcon installs under share/robolearn.
_SOURCE_ROOT = Path(__file__).resolve().parents[1]
_TRUE, _FALSE = ("true", "1"), ("false", "0")


class LaunchError(ValueError):
    """A launch file or launch argument that cannot be run; the message says what and why."""


@dataclass(frozen=True)
class LaunchCmd:
    """Run a ROS 2 launch file (XML or YAML) like ``ros2 launch``, without the ROS 2 launch library.

    Starts every node as a process (output prefixed with the node's name), stops them all on
    Ctrl-C or SIGTERM or when a node with ``on_exit="shutdown"`` exits, and exits with that
    node's exit code. ``FILE`` is a path, or a file name in robolearn's ``launch/`` folder;
    ``ros2 launch``'s ``robolearn FILE`` form works too.
    """

    file: tyro.conf.Positional[Annotated[str, tyro.conf.arg(metavar="FILE")]]
    """Launch file: a path, or the name of one in robolearn's launch/ folder (e.g. deploy_arm.launch.xml)."""
    args: tyro.conf.Positional[Annotated[tuple[str, ...], tyro.conf.arg(metavar="NAME:=VALUE")]] = ()
    """Launch arguments as ``name:=value``."""
    print: bool = False
    """Print the resolved processes (command lines, environment changes) instead of starting them."""
    sigterm_timeout: float = 5.0
    """Seconds a process has to exit after SIGINT before SIGTERM (and as long again before SIGKILL)."""


@dataclass(frozen=True)
class LaunchProcess:
    """One process a launch file starts, fully resolved."""

    label: str
    """Name its output lines are prefixed with: the node name, else the executable's."""
    cmd: tuple[str, ...]
    """Command line."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Complete environment of the process."""
    cwd: str | None = None
    """Working directory (None: the launcher's)."""
    shutdown_on_exit: bool = False
    """``on_exit="shutdown"``: when this process exits, stop the others and exit with its code."""
    node: str | None = None
    """Fully qualified ROS node name (``/ns/name``) when the process is a ``<node>`` with a name."""

    def env_changes(self, base: Mapping[str, str]) -> dict[str, str | None]:
        """Variables that differ from ``base`` (None: unset)."""
        changed: dict[str, str | None] = {k: v for k, v in self.env.items() if base.get(k) != v}
        changed.update({k: None for k in base if k not in self.env})
        return changed

    def describe(self, base: Mapping[str, str]) -> str:
        """One line: label, environment changes and the command, as a shell would take it."""
        changes = self.env_changes(base)
        # env(1) takes its -u options before the assignments.
        env = [f"-u {k}" for k, v in changes.items() if v is None]
        env += [f"{k}={shlex.quote(v)}" for k, v in changes.items() if v is not None]
        words = (["env", *env] if env else []) + [shlex.join(self.cmd)]
        if self.cwd:
            words.insert(0, f"cd {shlex.quote(self.cwd)} &&")
        tail = "  (on_exit: shutdown)" if self.shutdown_on_exit else ""
        return f"[{self.label}] {' '.join(words)}{tail}"


@dataclass(frozen=True)
class LaunchPlan:
    """What a launch file resolves to: its arguments' values and the processes to start."""

    file: Path
    """The launch file."""
    arguments: Mapping[str, str]
    """Every declared launch argument with its value, in declaration order."""
    descriptions: Mapping[str, str]
    """Every declared launch argument's description."""
    processes: tuple[LaunchProcess, ...]
    """Processes in the order the file starts them."""


# -- substitutions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sub:
    """``$(name arg arg ...)``; each argument is itself a template."""

    name: str
    args: tuple[tuple[str | _Sub, ...], ...]


_Template = tuple[str | _Sub, ...]


class _TemplateParser:
    """Parses launch's substitution syntax: text with ``$(name args...)``, arguments split by spaces,
    quoted with ' or " to hold spaces, and nesting."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def template(self) -> _Template:
        parts = self._parts(stop="")
        if self.i != len(self.text):
            raise LaunchError(f"unexpected {self.text[self.i]!r} in {self.text!r}")
        return parts

    def _parts(self, stop: str) -> _Template:
        parts: list[str | _Sub] = []
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

    def _substitution(self) -> _Sub:
        self.i += 2
        start = self.i
        while self.i < len(self.text) and (self.text[self.i].isalnum() or self.text[self.i] in "_-"):
            self.i += 1
        name = self.text[start : self.i]
        if not name:
            raise LaunchError(f"a substitution needs a name after '$(' in {self.text!r}")
        args: list[_Template] = []
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
        return _Sub(name, tuple(args))

    def _expect(self, char: str) -> None:
        if self.i >= len(self.text) or self.text[self.i] != char:
            raise LaunchError(f"missing {char!r} in {self.text!r}")
        self.i += 1


def _truth(text: str, what: str) -> bool:
    """launch's condition rule: 'true'/'1' and 'false'/'0', any case, nothing else."""
    value = text.strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise LaunchError(f"{what} is {text!r}; a condition must be true, false, 1 or 0")


# -- entities (an XML element or a YAML mapping) --------------------------------------------------


class _Entity:
    """One tag of a launch file with its attributes and sub-tags; remembers which were read so
    that an attribute nothing reads is an error, as in ``launch``'s ``assert_entity_completely_parsed``."""

    def __init__(
        self, kind: str, attrs: Mapping[str, str], elements: Sequence[_Entity], source: Path
    ) -> None:
        self.kind = kind
        self.attrs = dict(attrs)
        self.elements = list(elements)
        self.source = source
        self._read: set[str] = set()
        self._read_kinds: set[str] = set()

    @staticmethod
    def from_xml(element: ET.Element, source: Path) -> _Entity:
        return _Entity(element.tag, element.attrib, [_Entity.from_xml(e, source) for e in element], source)

    @staticmethod
    def from_yaml(kind: str, body: Any, source: Path) -> _Entity:
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise LaunchError(f"{source.name}: '{kind}' must be a mapping, got {body!r}")
        attrs: dict[str, str] = {}
        elements: list[_Entity] = []
        for key, value in body.items():
            if key == "children":
                elements += [_Entity.from_yaml(*_single_key(c, source), source) for c in value or []]
            elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
                elements += [_Entity.from_yaml(key, v, source) for v in value]
            elif isinstance(value, bool):
                attrs[key] = "true" if value else "false"
            elif isinstance(value, str | int | float):
                attrs[key] = str(value)
            else:
                raise LaunchError(f"{source.name}: '{kind}.{key}' must be a scalar or a list of mappings")
        return _Entity(kind, attrs, elements, source)

    def describe(self) -> str:
        label = next((self.attrs[k] for k in ("name", "exec", "file", "cmd") if k in self.attrs), "")
        return f"{self.source.name}: <{self.kind}{' ' + label if label else ''}>"

    def attr(self, name: str) -> str | None:
        self._read.add(name)
        return self.attrs.get(name)

    def required(self, name: str) -> str:
        value = self.attr(name)
        if value is None:
            raise LaunchError(f"{self.describe()} needs a '{name}' attribute")
        return value

    def nested(self, kind: str) -> list[_Entity]:
        self._read_kinds.add(kind)
        return [e for e in self.elements if e.kind == kind]

    def children(self, *, skip: tuple[str, ...] = ()) -> list[_Entity]:
        self._read_kinds.update(e.kind for e in self.elements)
        return [e for e in self.elements if e.kind not in skip]

    def check_read(self, supported: str) -> None:
        unread = sorted(set(self.attrs) - self._read)
        if unread:
            raise LaunchError(
                f"{self.describe()}: attribute(s) {', '.join(unread)} not supported here; "
                f"robolearn launch reads {supported}"
            )
        stray = sorted({e.kind for e in self.elements} - self._read_kinds)
        if stray:
            raise LaunchError(f"{self.describe()}: unexpected nested tag(s) {', '.join(stray)}")


def _single_key(item: Any, source: Path) -> tuple[str, Any]:
    if not isinstance(item, dict) or len(item) != 1:
        raise LaunchError(
            f"{source.name}: each action must be a mapping with one key (its tag), got {item!r}"
        )
    ((kind, body),) = item.items()
    return str(kind), body


def _load(path: Path) -> list[_Entity]:
    """The actions of a launch file."""
    if path.suffix == ".py":
        raise LaunchError(
            f"{path.name} is a Python launch file: it needs the ROS 2 launch library (ros2 launch on a "
            "ROS 2 machine); robolearn launch runs XML (.launch.xml) and YAML (.launch.yaml) files"
        )
    if not path.is_file():
        raise LaunchError(f"launch file not found: {path}")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise LaunchError(f"{path.name}: not valid YAML: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict) or set(data) != {"launch"}:
            raise LaunchError(f"{path.name}: a YAML launch file is one mapping with the key 'launch'")
        return [_Entity.from_yaml(*_single_key(item, path), path) for item in data["launch"] or []]
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise LaunchError(f"{path.name}: not valid XML: {exc}") from None
    if root.tag != "launch":
        raise LaunchError(f"{path.name}: the root tag must be <launch>, got <{root.tag}>")
    entity = _Entity.from_xml(root, path)
    entity.attr("deprecated")
    entity.attr("version")
    children = entity.children()
    entity.check_read("deprecated, version")
    return children


# -- package lookup -------------------------------------------------------------------------------


def _ament_prefixes(env: Mapping[str, str]) -> list[Path]:
    return [Path(p) for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def package_prefix(package: str, env: Mapping[str, str] = os.environ) -> Path:
    """Install prefix of a ROS package, found through the ament resource index as ``ros2`` does."""
    for prefix in _ament_prefixes(env):
        if (prefix / "share" / "ament_index" / "resource_index" / "packages" / package).is_file():
            return prefix
    if package == PACKAGE:
        return Path(sys.prefix)
    raise LaunchError(
        f"package '{package}' not found in the ament index (AMENT_PREFIX_PATH="
        f"{env.get('AMENT_PREFIX_PATH', '')!r}); source its workspace's setup script"
    )


def package_share(package: str, env: Mapping[str, str] = os.environ) -> Path:
    """``$(find-pkg-share PACKAGE)``. For robolearn, a source checkout (the running code's own
    tree) comes first, then the ament index (a colcon workspace), then ``sys.prefix/share/robolearn``
    (where a wheel's data files go)."""
    candidates: list[Path] = []
    if package == PACKAGE:
        candidates.append(_SOURCE_ROOT)
    candidates += [p / "share" / package for p in _ament_prefixes(env)]
    if package == PACKAGE:
        candidates.append(Path(sys.prefix) / "share" / PACKAGE)
    for share in candidates:
        if (share / "package.xml").is_file():
            return share
    raise LaunchError(
        f"share folder of package '{package}' not found (looked in: "
        f"{', '.join(map(str, candidates)) or 'none'}); for another ROS package, "
        "source its workspace's setup script"
    )


def _node_executable(package: str, executable: str, env: Mapping[str, str]) -> list[str]:
    """Command that starts ``executable`` of ``package``: ``lib/PACKAGE/EXE`` under the ament
    prefixes, as ``ros2 run`` finds it; for robolearn also the console script of the running
    interpreter and ``python -m robolearn.hardware.ros.EXE``."""
    looked: list[str] = []
    if package == PACKAGE:
        script = Path(sys.executable).parent / executable
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
        looked.append(str(script))
    for prefix in _ament_prefixes(env):
        exe = prefix / "lib" / package / executable
        if exe.is_file() and os.access(exe, os.X_OK):
            return [str(exe)]
        looked.append(str(exe))
    if package == PACKAGE:
        module = f"{PACKAGE}.hardware.ros.{executable}"
        spec = importlib.util.find_spec(f"{PACKAGE}.hardware")
        folders = list(spec.submodule_search_locations or []) if spec else []
        # Look for the file rather than import it: the ros package needs rclpy, --print must not.
        if any((Path(f) / "ros" / f"{executable}.py").is_file() for f in folders):
            return [sys.executable, "-m", module]
        looked.append(f"module {module}")
    elif not _ament_prefixes(env):
        looked.append("AMENT_PREFIX_PATH is empty: source the workspace's setup script")
    raise LaunchError(
        f"executable '{executable}' of package '{package}' not found (looked for: {'; '.join(looked)})"
    )


# -- resolution -----------------------------------------------------------------------------------


@dataclass
class _Scope:
    """What actions see: launch configurations, the processes' environment, the current file.
    An include shares its includer's dictionaries; a scoped group copies them."""

    configs: dict[str, str]
    env: dict[str, str]
    file: Path

    def copy(self) -> _Scope:
        return _Scope(dict(self.configs), dict(self.env), self.file)


_NODE_ATTRS = "pkg, exec, name, namespace, args, ros_args, output, on_exit, launch-prefix, cwd, if, unless"
_EXEC_ATTRS = "cmd, name, output, on_exit, launch-prefix, cwd, if, unless"
_OUTPUTS = ("screen", "log", "both", "own_log", "full")


class _Resolver:
    """Visits a launch file's actions in order and collects the processes they start."""

    def __init__(self) -> None:
        self.declared: dict[str, str] = {}
        self.values: dict[str, str] = {}
        self.processes: list[LaunchProcess] = []
        self.anon: dict[str, str] = {}
        self.stack: list[Path] = []
        self.actions: dict[str, Callable[[_Entity, _Scope], None]] = {
            "arg": self._arg,
            "let": self._let,
            "group": self._group,
            "include": self._include,
            "push_ros_namespace": self._push_namespace,
            "push-ros-namespace": self._push_namespace,
            "set_env": self._set_env,
            "unset_env": self._unset_env,
            "node": self._node,
            "executable": self._executable,
        }

    # substitutions

    def text(self, template: str | None, scope: _Scope) -> str:
        return "" if template is None else self._eval(_TemplateParser(template).template(), scope)

    def _eval(self, template: _Template, scope: _Scope) -> str:
        return "".join(p if isinstance(p, str) else self._sub(p, scope) for p in template)

    def _sub(self, sub: _Sub, scope: _Scope) -> str:
        args = [self._eval(a, scope) for a in sub.args]
        where = f"{scope.file.name}: $({sub.name}{''.join(' ' + a for a in args)})"

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
            raise LaunchError(f"{where}: no launch argument or <let> named '{args[0]}' (set: {known})")
        if sub.name in ("env", "optenv"):
            arity(1, 2)
            if args[0] in scope.env:
                return scope.env[args[0]]
            if len(args) == 2 or sub.name == "optenv":
                return args[1] if len(args) == 2 else ""
            raise LaunchError(f"{where}: environment variable {args[0]} is not set and has no default")
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
                raise LaunchError(f"{where}: no executable {args[0]} on PATH")
            return found
        if sub.name in ("dirname", "filename"):
            arity(0)
            return str(scope.file.parent if sub.name == "dirname" else scope.file)
        if sub.name == "anon":
            arity(1)
            return self.anon.setdefault(args[0], f"{args[0]}_{secrets.token_hex(4)}")
        if sub.name == "not":
            arity(1)
            return str(not _truth(args[0], where)).lower()
        if sub.name in ("and", "or"):
            arity(2)
            a, b = (_truth(x, where) for x in args)
            return str(a and b if sub.name == "and" else a or b).lower()
        if sub.name in ("any", "all"):
            truths = [_truth(x, where) for x in args]
            return str(any(truths) if sub.name == "any" else all(truths)).lower()
        if sub.name == "equals":
            arity(2)
            return str(args[0] == args[1]).lower()
        raise LaunchError(
            f"{where}: substitution '{sub.name}' is not supported by robolearn launch (supported: var, env, "
            "optenv, find-pkg-share, find-pkg-prefix, find-exec, dirname, filename, anon, not, and, or, any, "
            "all, equals)"
        )

    def cmdline(self, template: str, scope: _Scope) -> list[str]:
        """Split a command line as ``ExecuteProcess`` does: literal text splits on spaces (shell
        quoting rules), a substitution's value never does."""
        words: list[str] = []
        current: list[str] | None = None
        for part in _TemplateParser(template).template():
            if isinstance(part, _Sub):
                current = [*(current or []), self._sub(part, scope)]
                continue
            try:
                tokens = shlex.split(part)
            except ValueError as exc:
                raise LaunchError(f"{scope.file.name}: cannot split {template!r}: {exc}") from None
            if not tokens:
                if current is not None:
                    words.append("".join(current))
                current = None
                continue
            if part[0].isspace() and current is not None:
                words.append("".join(current))
                current = None
            first, *rest = tokens
            current = [*(current or []), first]
            if rest:
                words.append("".join(current))
                words += rest[:-1]
                current = [rest[-1]]
            if part[-1].isspace():
                words.append("".join(current))
                current = None
        if current is not None:
            words.append("".join(current))
        return words

    # actions

    def visit(self, entities: Sequence[_Entity], scope: _Scope) -> None:
        for entity in entities:
            handler = self.actions.get(entity.kind)
            if handler is None:
                raise LaunchError(
                    f"{entity.describe()}: tag not supported by robolearn launch (supported: "
                    f"{', '.join(sorted(self.actions))})"
                )
            condition_if, condition_unless = entity.attr("if"), entity.attr("unless")
            if condition_if is not None and not _truth(
                self.text(condition_if, scope), f"{entity.describe()} if"
            ):
                continue
            if condition_unless is not None and _truth(
                self.text(condition_unless, scope), f"{entity.describe()} unless"
            ):
                continue
            handler(entity, scope)

    def _arg(self, entity: _Entity, scope: _Scope) -> None:
        name = entity.required("name")
        default = entity.attr("default")
        description = entity.attr("description") or ""
        choices = [c.required("value") for c in entity.nested("choice")]
        for choice in entity.nested("choice"):
            choice.check_read("value")
        entity.check_read("name, default, description, <choice value>, if, unless")
        self.declared.setdefault(name, description)
        if name not in scope.configs:
            if default is None:
                declared = ", ".join(_declared_names(scope.file))
                raise LaunchError(
                    f"{scope.file.name}: missing argument {name}:=... ({description or 'no description'}); "
                    f"declared: {declared}"
                )
            scope.configs[name] = self.text(default, scope)
        if choices and scope.configs[name] not in choices:
            raise LaunchError(
                f"{scope.file.name}: argument {name}:={scope.configs[name]} is not one of "
                f"{', '.join(choices)}"
            )
        self.values.setdefault(name, scope.configs[name])

    def _let(self, entity: _Entity, scope: _Scope) -> None:
        name, value = entity.required("name"), entity.required("value")
        entity.check_read("name, value, if, unless")
        scope.configs[self.text(name, scope)] = self.text(value, scope)

    def _group(self, entity: _Entity, scope: _Scope) -> None:
        scoped = _truth(self.text(entity.attr("scoped") or "true", scope), f"{entity.describe()} scoped")
        forwarding = _truth(
            self.text(entity.attr("forwarding") or "true", scope), f"{entity.describe()} forwarding"
        )
        keep = {
            self.text(k.required("name"), scope): self.text(k.required("value"), scope)
            for k in entity.nested("keep")
        }
        for k in entity.nested("keep"):
            k.check_read("name, value")
        children = entity.children(skip=("keep",))
        entity.check_read("scoped, forwarding, <keep name value>, if, unless")
        inner = scope
        if scoped:
            inner = scope.copy()
            if not forwarding:
                inner.configs.clear()
        inner.configs.update(keep)
        self.visit(children, inner)

    def _include(self, entity: _Entity, scope: _Scope) -> None:
        file = Path(self.text(entity.required("file"), scope))
        given = [
            (self.text(a.required("name"), scope), self.text(a.required("value"), scope))
            for a in entity.nested("arg")
        ]
        for a in entity.nested("arg"):
            a.check_read("name, value")
        entity.check_read("file, <arg name value>, if, unless")
        # ROS 2 resolves a relative include against the working directory.
        path = file if file.is_absolute() else Path.cwd() / file
        if path.resolve() in self.stack:
            raise LaunchError(
                f"{scope.file.name}: {path.name} includes itself "
                f"(through {', '.join(p.name for p in self.stack)})"
            )
        entities = _load(path)
        scope.configs.update(given)
        self.stack.append(path.resolve())
        self.visit(entities, replace(scope, file=path))
        self.stack.pop()

    def _push_namespace(self, entity: _Entity, scope: _Scope) -> None:
        pushed = self.text(entity.required("namespace"), scope)
        entity.check_read("namespace, if, unless")
        scope.configs["ros_namespace"] = _absolute(
            _prefix_namespace(scope.configs.get("ros_namespace"), pushed)
        )

    def _set_env(self, entity: _Entity, scope: _Scope) -> None:
        name, value = entity.required("name"), entity.required("value")
        entity.check_read("name, value, if, unless")
        scope.env[self.text(name, scope)] = self.text(value, scope)

    def _unset_env(self, entity: _Entity, scope: _Scope) -> None:
        name = entity.required("name")
        entity.check_read("name, if, unless")
        scope.env.pop(self.text(name, scope), None)

    def _process_env(self, entity: _Entity, scope: _Scope) -> dict[str, str]:
        env = dict(scope.env)
        for e in entity.nested("env"):
            env[self.text(e.required("name"), scope)] = self.text(e.required("value"), scope)
            e.check_read("name, value")
        return env

    def _common(self, entity: _Entity, scope: _Scope) -> tuple[list[str], bool, str | None]:
        """Attributes ``<node>`` and ``<executable>`` share: prefix, on_exit, cwd, output."""
        prefix = self.cmdline(entity.attr("launch-prefix") or "", scope)
        on_exit = entity.attr("on_exit")
        if on_exit not in (None, "shutdown"):
            raise LaunchError(f"{entity.describe()}: on_exit must be 'shutdown', got {on_exit!r}")
        output = self.text(entity.attr("output") or "screen", scope)
        if output not in _OUTPUTS:
            raise LaunchError(
                f"{entity.describe()}: output must be one of {', '.join(_OUTPUTS)}, got {output!r}"
            )
        cwd = entity.attr("cwd")
        return prefix, on_exit == "shutdown", self.text(cwd, scope) if cwd is not None else None

    def _executable(self, entity: _Entity, scope: _Scope) -> None:
        cmd = self.cmdline(entity.required("cmd"), scope)
        name = self.text(entity.attr("name"), scope) or (Path(cmd[0]).name if cmd else "")
        prefix, shutdown, cwd = self._common(entity, scope)
        env = self._process_env(entity, scope)
        entity.check_read(_EXEC_ATTRS + ", <env name value>")
        if not cmd:
            raise LaunchError(f"{entity.describe()}: empty cmd")
        self._add(LaunchProcess(name, (*prefix, *cmd), env, cwd, shutdown))

    def _node(self, entity: _Entity, scope: _Scope) -> None:
        package = self.text(entity.required("pkg"), scope)
        executable = self.text(entity.required("exec"), scope)
        name_attr, ns_attr = entity.attr("name"), entity.attr("namespace")
        name = self.text(name_attr, scope) if name_attr is not None else None
        args = self.cmdline(entity.attr("args") or "", scope)
        ros_args = self.cmdline(entity.attr("ros_args") or "", scope)
        prefix, shutdown, cwd = self._common(entity, scope)
        env = self._process_env(entity, scope)
        rules: list[str] = []
        for param in entity.nested("param"):
            rules += self._param(param, scope, "")
        remaps = [
            (self.text(r.required("from"), scope), self.text(r.required("to"), scope))
            for r in entity.nested("remap")
        ]
        for r in entity.nested("remap"):
            r.check_read("from, to")
        entity.check_read(_NODE_ATTRS + ", <param>, <remap>, <env>")

        namespace = _prefix_namespace(
            scope.configs.get("ros_namespace"), self.text(ns_attr, scope) if ns_attr is not None else None
        )
        namespace = _absolute(namespace) if namespace is not None else None
        if name is not None:
            _check_ros_name(name, f"{entity.describe()} name", allow_slash=False)
        if namespace is not None:
            _check_ros_name(namespace, f"{entity.describe()} namespace", allow_slash=True)
        cmd = [*prefix, *_node_executable(package, executable, env), *args, "--ros-args", *ros_args]
        if name is not None:
            cmd += ["-r", f"__node:={name}"]
        if namespace is not None:
            cmd += ["-r", f"__ns:={namespace}"]
        cmd += rules
        for source, target in remaps:
            cmd += ["-r", f"{source}:={target}"]
        fq = None if name is None else (namespace.rstrip("/") if namespace else "") + "/" + name
        self._add(LaunchProcess(name or executable, tuple(cmd), env, cwd, shutdown, fq))

    def _param(self, param: _Entity, scope: _Scope, outer: str) -> list[str]:
        """``-p name:=value`` rules (``--params-file`` for ``from``); nested params join names with dots."""
        source = param.attr("from")
        if source is not None:
            param.check_read("from")
            path = self.text(source, scope)
            if not Path(path).is_file():
                raise LaunchError(f"{param.describe()}: parameter file {path} not found")
            return ["--params-file", path]
        name = outer + self.text(param.required("name"), scope)
        value = param.attr("value")
        inner = param.nested("param")
        param.check_read("name, value, from, nested <param>")
        if (value is None) == (not inner):
            raise LaunchError(f"{param.describe()}: give either a value or nested <param> tags")
        if inner:
            return [rule for p in inner for rule in self._param(p, scope, name + ".")]
        return ["-p", f"{name}:={_yaml_value(self.text(value, scope), name)}"]

    def _add(self, process: LaunchProcess) -> None:
        labels = {p.label for p in self.processes}
        label, k = process.label, 2
        while label in labels:
            label, k = f"{process.label}-{k}", k + 1
        self.processes.append(replace(process, label=label))


def _declared_names(path: Path) -> list[str]:
    """Arguments a file declares anywhere in it (for error messages)."""

    def walk(entities: Sequence[_Entity]) -> Iterator[str]:
        for e in entities:
            if e.kind == "arg" and "name" in e.attrs:
                yield e.attrs["name"]
            elif e.kind == "group":
                yield from walk(e.elements)

    return list(dict.fromkeys(walk(_load(path))))


def _yaml_value(text: str, name: str) -> str:
    """A parameter's value as ``launch_ros`` types it (YAML: bool, int, float, str, or a list of
    one of them), written back as YAML for a ``-p`` rule."""
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        raise LaunchError(f"parameter {name}: {text!r} is not a valid YAML value") from None
    if isinstance(value, list):
        kinds = {type(v) for v in value}
        if not value or len(kinds) != 1 or not kinds <= {bool, int, float, str}:
            raise LaunchError(
                f"parameter {name}: a list must be non-empty and of one type (bool, int, float, str)"
            )
    elif not isinstance(value, bool | int | float | str):
        raise LaunchError(f"parameter {name}: {text!r} is not a bool, int, float, string or list")
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 30)
    return dumped.removesuffix("\n").removesuffix("\n...").strip()


def _prefix_namespace(base: str | None, ns: str | None) -> str | None:
    """``launch_ros``'s rule: a relative namespace extends the pushed one, an absolute one replaces it."""
    if ns is None:
        combined = base
    elif not base or ns.startswith("/"):
        combined = ns
    else:
        combined = ("" if base == "/" else base) + "/" + ns
    if combined is not None and combined != "/":
        combined = combined.rstrip("/")
    return combined


def _absolute(ns: str | None) -> str:
    ns = ns or "/"
    return ns if ns.startswith("/") else "/" + ns


def _check_ros_name(value: str, what: str, *, allow_slash: bool) -> None:
    """rcl's name rules: letters, digits and underscores, not starting with a digit; '/' separates
    namespace tokens."""
    tokens = value.strip("/").split("/") if allow_slash else [value]
    if value == "/" and allow_slash:
        return
    for token in tokens:
        if (
            not token
            or token[0].isdigit()
            or not all((c.isalnum() and c.isascii()) or c == "_" for c in token)
        ):
            raise LaunchError(
                f"{what} {value!r} is not a valid ROS name (letters, digits, _; not starting with a digit)"
            )


def parse_arguments(words: Sequence[str]) -> dict[str, str]:
    """``name:=value`` words to a mapping."""
    arguments: dict[str, str] = {}
    for word in words:
        name, sep, value = word.partition(":=")
        if not sep or not name:
            raise LaunchError(f"launch arguments are name:=value, got {word!r}")
        arguments[name] = value
    return arguments


def resolve_launch(file: Path, arguments: Mapping[str, str] | None = None) -> LaunchPlan:
    """Resolve a launch file with the given arguments (defaults for the rest) into processes."""
    arguments = dict(arguments or {})
    resolver = _Resolver()
    path = file.resolve()
    resolver.stack.append(path)
    resolver.visit(_load(path), _Scope(dict(arguments), dict(os.environ), path))
    unknown = [name for name in arguments if name not in resolver.declared]
    if unknown:
        raise LaunchError(
            f"{path.name}: unknown argument(s) {', '.join(unknown)}; declared: "
            f"{', '.join(resolver.declared) or 'none'}"
        )
    return LaunchPlan(path, resolver.values, resolver.declared, tuple(resolver.processes))


def find_launch_file(name: str) -> Path:
    """A path as given, else a file of robolearn's ``launch/`` folder by name."""
    path = Path(name)
    if path.exists() or path.parent != Path("."):
        return path
    share = package_share(PACKAGE) / "launch"
    if (share / name).is_file():
        return share / name
    available = sorted(p.name for p in share.glob("*.launch.*")) if share.is_dir() else []
    raise LaunchError(
        f"launch file not found: {name} (robolearn's launch files: {', '.join(available) or 'none'})"
    )


# -- running --------------------------------------------------------------------------------------


def _pump(stream: IO[bytes], label: str, out: TextIO, lock: threading.Lock) -> None:
    """Copy a process's output line by line, each prefixed with its label."""
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        with lock:
            out.write(f"[{label}] {line}\n")
            out.flush()
    stream.close()


def _exit_code(returncode: int) -> int:
    """A shell's convention for a process ended by a signal: 128 + the signal number."""
    return 128 - returncode if returncode < 0 else returncode


def run_processes(
    processes: Sequence[LaunchProcess],
    *,
    sigterm_timeout: float = 5.0,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Start the processes and wait. Stops them all on SIGINT/SIGTERM or when a process marked
    ``shutdown_on_exit`` exits: SIGINT first (rclpy nodes shut down cleanly on it), SIGTERM after
    ``sigterm_timeout`` seconds, SIGKILL as long again after that; a second signal escalates at
    once. Returns the exit code of the process that ended the launch, 128 + the signal's number
    when a signal did, otherwise the first non-zero exit code (0 when every process succeeded)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    lock = threading.Lock()
    running: list[tuple[LaunchProcess, subprocess.Popen[bytes]]] = []
    pumps: list[threading.Thread] = []
    signals: list[int] = []

    def say(message: str) -> None:
        with lock:
            err.write(f"[launch] {message}\n")
            err.flush()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda signum, frame: signals.append(signum))
    try:
        for spec in processes:
            try:
                # Own session: a terminal's Ctrl-C reaches the launcher only, which stops the nodes in order.
                proc = subprocess.Popen(
                    spec.cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env={**spec.env, "PYTHONUNBUFFERED": "1"},
                    cwd=spec.cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                _supervise(running, signals, sigterm_timeout, say, stop=True)
                raise LaunchError(f"cannot start {spec.label} ({spec.cmd[0]}): {exc.strerror}") from None
            running.append((spec, proc))
            say(f"{spec.label} started, pid {proc.pid}")
            for stream, sink in ((proc.stdout, out), (proc.stderr, err)):
                assert stream is not None
                pump = threading.Thread(target=_pump, args=(stream, spec.label, sink, lock), daemon=True)
                pump.start()
                pumps.append(pump)
        return _supervise(running, signals, sigterm_timeout, say)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for pump in pumps:
            pump.join(timeout=2.0)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def _supervise(
    running: Sequence[tuple[LaunchProcess, subprocess.Popen[bytes]]],
    signals: list[int],
    sigterm_timeout: float,
    say: Callable[[str], None],
    *,
    stop: bool = False,
) -> int:
    """Wait for the processes; stop them all in stages once asked to (see ``run_processes``)."""
    result: int | None = None
    first_failure = 0
    exited: set[int] = set()
    stage = 0
    next_stage_at = float("inf")
    seen_signals = 0

    def escalate() -> None:
        nonlocal stage, next_stage_at
        sig = _STOP_SIGNALS[min(stage, len(_STOP_SIGNALS) - 1)]
        stage += 1
        next_stage_at = time.monotonic() + sigterm_timeout
        for _, proc in running:
            if proc.pid not in exited:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)

    if stop:
        escalate()
    while True:
        for spec, proc in running:
            code = proc.poll()
            if code is None or proc.pid in exited:
                continue
            exited.add(proc.pid)
            say(f"{spec.label} exited with code {_exit_code(code)}")
            if stage == 0:
                first_failure = first_failure or _exit_code(code)
                if spec.shutdown_on_exit:
                    say(f"{spec.label} has on_exit=shutdown: stopping the others")
                    result = _exit_code(code)
                    escalate()
        if len(exited) == len(running):
            break
        if len(signals) > seen_signals:
            seen_signals = len(signals)
            if result is None:
                result = 128 + signals[-1]
            escalate()
        elif stage and time.monotonic() >= next_stage_at:
            escalate()
        time.sleep(0.02)
    return result if result is not None else first_failure


def format_plan(plan: LaunchPlan) -> str:
    """The ``--print`` text: the arguments with their values and meaning, then one line per process."""
    lines = [f"# {plan.file}"]
    lines += [
        f"#   {name}:={value}" + (f"  ({plan.descriptions[name]})" if plan.descriptions.get(name) else "")
        for name, value in plan.arguments.items()
    ]
    lines += [p.describe(os.environ) for p in plan.processes]
    return "\n".join(lines)


def run_launch(cmd: LaunchCmd) -> int:
    """``robolearn launch``: resolve the file, then print or run it; returns the exit code."""
    words = list(cmd.args)
    name = cmd.file
    if name == PACKAGE and words and ":=" not in words[0]:
        name = words.pop(0)  # ros2 launch's "PACKAGE FILE" form
    plan = resolve_launch(find_launch_file(name), parse_arguments(words))
    if cmd.print:
        print(format_plan(plan))
        return 0
    if not plan.processes:
        print(f"{plan.file.name}: nothing to start")
        return 0
    return run_processes(plan.processes, sigterm_timeout=cmd.sigterm_timeout)
