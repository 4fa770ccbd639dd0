"""The resolver: a launch file's actions, in order, turned into a :class:`LaunchPlan`.

It follows ``launch_xml``/``launch_yaml`` and ``launch_ros``: actions ``<arg>`` (with ``<choice>``),
``<let>``, ``<node>``, ``<executable>``, ``<include>`` (with ``<arg>``), ``<group>`` (``scoped``,
``forwarding``, ``<keep>``), ``<push_ros_namespace>``, ``<set_env>``, ``<unset_env>``; ``if``/``unless``
on every action. Launch configurations behave as in ``launch``: an ``<include>`` shares its
includer's, a scoped ``<group>`` (the default) gets a copy, and a command-line argument is a
configuration set before the first action.

A ``<node>`` becomes ``EXE [args] --ros-args [ros_args] -r __node:=NAME -r __ns:=/NS -p k:=v ...
-r from:=to`` as ``launch_ros`` builds it (parameters as ``-p`` rules instead of a temporary YAML
file; both are read with YAML rules). Anything else (unknown tags, attributes or substitutions) is
refused with a message rather than half-supported. Groups, includes and processes are bounded by
``LaunchLimits``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import yaml

from robolearn.hardware.ros.launch.formats import Entity, LaunchFiles, load_yaml
from robolearn.hardware.ros.launch.limits import DEFAULT_LIMITS, LaunchLimits
from robolearn.hardware.ros.launch.packages import node_executable
from robolearn.hardware.ros.launch.plan import LaunchError, LaunchPlan, LaunchProcess, brief
from robolearn.hardware.ros.launch.substitutions import Scope, Substitutions, truth

_NODE_ATTRS = "pkg, exec, name, namespace, args, ros_args, output, on_exit, launch-prefix, cwd, if, unless"
_EXEC_ATTRS = "cmd, name, output, on_exit, launch-prefix, cwd, if, unless"
_OUTPUTS = ("screen", "log", "both", "own_log", "full")


class _Resolver:
    """Visits a launch file's actions in order and collects the processes they start."""

    def __init__(self, limits: LaunchLimits) -> None:
        self.limits = limits
        self.files = LaunchFiles(limits)
        substitutions = Substitutions(limits)
        self.text = substitutions.text
        self.cmdline = substitutions.cmdline
        self.declared: dict[str, str] = {}
        self.values: dict[str, str] = {}
        self.processes: list[LaunchProcess] = []
        self.stack: list[Path] = []
        """The files being included, outermost first."""
        self.depth = 0
        """Groups and includes open now, across files."""
        self.includes = 0
        """Includes run so far."""
        self.actions: dict[str, Callable[[Entity, Scope], None]] = {
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

    # actions

    def visit(self, entities: Sequence[Entity], scope: Scope) -> None:
        for entity in entities:
            handler = self.actions.get(entity.kind)
            if handler is None:
                raise LaunchError(
                    f"{entity.describe()}: tag not supported by robolearn launch (supported: "
                    f"{', '.join(sorted(self.actions))})"
                )
            condition_if, condition_unless = entity.attr("if"), entity.attr("unless")
            if condition_if is not None and not truth(
                self.text(condition_if, scope), f"{entity.describe()} if"
            ):
                continue
            if condition_unless is not None and truth(
                self.text(condition_unless, scope), f"{entity.describe()} unless"
            ):
                continue
            handler(entity, scope)

    def _arg(self, entity: Entity, scope: Scope) -> None:
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
                declared = ", ".join(self._declared_names(scope.file))
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

    def _let(self, entity: Entity, scope: Scope) -> None:
        name, value = entity.required("name"), entity.required("value")
        entity.check_read("name, value, if, unless")
        scope.configs[self.text(name, scope)] = self.text(value, scope)

    def _group(self, entity: Entity, scope: Scope) -> None:
        scoped = truth(self.text(entity.attr("scoped") or "true", scope), f"{entity.describe()} scoped")
        forwarding = truth(
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
        with self._nested(entity):
            self.visit(children, inner)

    def _include(self, entity: Entity, scope: Scope) -> None:
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
        self.includes += 1
        if self.includes > self.limits.max_includes:
            raise LaunchError(
                f"{scope.file.name}: more than {self.limits.max_includes} includes in one launch "
                "(limit; a file included N times counts N times)"
            )
        if len(self.stack) >= self.limits.max_include_depth:
            raise LaunchError(
                f"{scope.file.name}: includes nested deeper than {self.limits.max_include_depth} files "
                f"at {path.name} (limit)"
            )
        entities = self.files.load(path)
        scope.configs.update(given)
        self.stack.append(path.resolve())
        with self._nested(entity):
            self.visit(entities, replace(scope, file=path))
        self.stack.pop()

    @contextlib.contextmanager
    def _nested(self, entity: Entity) -> Iterator[None]:
        """One more level of groups and includes; bounded because visiting them recurses."""
        self.depth += 1
        if self.depth > self.limits.max_depth:
            raise LaunchError(
                f"{entity.describe()}: groups and includes nested deeper than {self.limits.max_depth} "
                "levels, counted across included files (limit)"
            )
        try:
            yield
        finally:
            self.depth -= 1

    def _push_namespace(self, entity: Entity, scope: Scope) -> None:
        pushed = self.text(entity.required("namespace"), scope)
        entity.check_read("namespace, if, unless")
        scope.configs["ros_namespace"] = _absolute(
            _prefix_namespace(scope.configs.get("ros_namespace"), pushed)
        )

    def _set_env(self, entity: Entity, scope: Scope) -> None:
        name, value = entity.required("name"), entity.required("value")
        entity.check_read("name, value, if, unless")
        scope.env[self.text(name, scope)] = self.text(value, scope)

    def _unset_env(self, entity: Entity, scope: Scope) -> None:
        name = entity.required("name")
        entity.check_read("name, if, unless")
        scope.env.pop(self.text(name, scope), None)

    def _process_env(self, entity: Entity, scope: Scope) -> dict[str, str]:
        env = dict(scope.env)
        for e in entity.nested("env"):
            env[self.text(e.required("name"), scope)] = self.text(e.required("value"), scope)
            e.check_read("name, value")
        return env

    def _common(self, entity: Entity, scope: Scope) -> tuple[list[str], bool, str | None]:
        """Attributes ``<node>`` and ``<executable>`` share: prefix, on_exit, cwd, output."""
        prefix = self.cmdline(entity.attr("launch-prefix") or "", scope)
        on_exit = entity.attr("on_exit")
        if on_exit not in (None, "shutdown"):
            raise LaunchError(f"{entity.describe()}: on_exit must be 'shutdown', got {brief(str(on_exit))!r}")
        output = self.text(entity.attr("output") or "screen", scope)
        if output not in _OUTPUTS:
            raise LaunchError(
                f"{entity.describe()}: output must be one of {', '.join(_OUTPUTS)}, got {brief(output)!r}"
            )
        cwd = entity.attr("cwd")
        return prefix, on_exit == "shutdown", self.text(cwd, scope) if cwd is not None else None

    def _executable(self, entity: Entity, scope: Scope) -> None:
        cmd = self.cmdline(entity.required("cmd"), scope)
        name = self.text(entity.attr("name"), scope) or (Path(cmd[0]).name if cmd else "")
        prefix, shutdown, cwd = self._common(entity, scope)
        env = self._process_env(entity, scope)
        entity.check_read(_EXEC_ATTRS + ", <env name value>")
        if not cmd:
            raise LaunchError(f"{entity.describe()}: empty cmd")
        self._add(entity, LaunchProcess(name, (*prefix, *cmd), env, cwd, shutdown))

    def _node(self, entity: Entity, scope: Scope) -> None:
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
        cmd = [*prefix, *node_executable(package, executable, env), *args, "--ros-args", *ros_args]
        if name is not None:
            cmd += ["-r", f"__node:={name}"]
        if namespace is not None:
            cmd += ["-r", f"__ns:={namespace}"]
        cmd += rules
        for source, target in remaps:
            cmd += ["-r", f"{source}:={target}"]
        fq = None if name is None else (namespace.rstrip("/") if namespace else "") + "/" + name
        self._add(entity, LaunchProcess(name or executable, tuple(cmd), env, cwd, shutdown, fq))

    def _param(self, param: Entity, scope: Scope, outer: str) -> list[str]:
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
        typed = _yaml_value(self.text(value, scope), f"{scope.file.name}: parameter {name}", self.limits)
        return ["-p", f"{name}:={typed}"]

    def _add(self, entity: Entity, process: LaunchProcess) -> None:
        if len(self.processes) >= self.limits.max_processes:
            raise LaunchError(
                f"{entity.describe()}: more than {self.limits.max_processes} processes in one launch (limit)"
            )
        labels = {p.label for p in self.processes}
        label, k = process.label, 2
        while label in labels:
            label, k = f"{process.label}-{k}", k + 1
        self.processes.append(replace(process, label=label))

    def _declared_names(self, path: Path) -> list[str]:
        """Arguments a file declares anywhere in it (for error messages)."""

        def walk(entities: Sequence[Entity]) -> Iterator[str]:
            for e in entities:
                if e.kind == "arg" and "name" in e.attrs:
                    yield e.attrs["name"]
                elif e.kind == "group":
                    yield from walk(e.elements)

        return list(dict.fromkeys(walk(self.files.load(path))))


def _yaml_value(text: str, what: str, limits: LaunchLimits) -> str:
    """A parameter's value as ``launch_ros`` types it (YAML: bool, int, float, str, or a list of
    one of them), written back as YAML for a ``-p`` rule. ``what`` names the file and parameter."""
    value = load_yaml(text, what, limits) if text else ""
    if isinstance(value, list):
        kinds = {type(v) for v in value}
        if not value or len(kinds) != 1 or not kinds <= {bool, int, float, str}:
            raise LaunchError(f"{what}: a list must be non-empty and of one type (bool, int, float, str)")
    elif not isinstance(value, bool | int | float | str):
        raise LaunchError(f"{what}: {brief(text)!r} is not a bool, int, float, string or list")
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
                f"{what} {brief(value)!r} is not a valid ROS name "
                "(letters, digits, _; not starting with a digit)"
            )


def parse_arguments(words: Sequence[str]) -> dict[str, str]:
    """``name:=value`` words to a mapping."""
    arguments: dict[str, str] = {}
    for word in words:
        name, sep, value = word.partition(":=")
        if not sep or not name:
            raise LaunchError(f"launch arguments are name:=value, got {brief(word)!r}")
        arguments[name] = value
    return arguments


def resolve_launch(
    file: Path, arguments: Mapping[str, str] | None = None, limits: LaunchLimits = DEFAULT_LIMITS
) -> LaunchPlan:
    """Resolve a launch file with the given arguments (defaults for the rest) into processes."""
    arguments = dict(arguments or {})
    resolver = _Resolver(limits)
    path = file.resolve()
    resolver.stack.append(path)
    resolver.visit(resolver.files.load(path), Scope(dict(arguments), dict(os.environ), path))
    unknown = [name for name in arguments if name not in resolver.declared]
    if unknown:
        raise LaunchError(
            f"{path.name}: unknown argument(s) {', '.join(unknown)}; declared: "
            f"{', '.join(resolver.declared) or 'none'}"
        )
    return LaunchPlan(path, resolver.values, resolver.declared, tuple(resolver.processes))
