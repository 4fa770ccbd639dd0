"""Launch file formats: XML (``launch_xml``) and YAML (``launch_yaml``) files read into entities.

Both front-ends produce the same :class:`Entity` tree, so the resolver never knows which format a
file was. Reading is bounded (``LaunchLimits``): file size, nesting depth, no YAML aliases and no XML
entity declarations, because either would let a small file expand without bound (issue 15).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.parsers import expat

import yaml

from robolearn.hardware.ros.launch.limits import LaunchLimits
from robolearn.hardware.ros.launch.plan import LaunchError, brief

# libyaml's parser when PyYAML has it: about four times faster than the pure-Python one.
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Entity:
    """One tag of a launch file with its attributes and sub-tags; remembers which were read so
    that an attribute nothing reads is an error, as in ``launch``'s ``assert_entity_completely_parsed``."""

    def __init__(self, kind: str, attrs: Mapping[str, str], elements: Sequence[Entity], source: Path) -> None:
        self.kind = kind
        self.attrs = dict(attrs)
        self.elements = list(elements)
        self.source = source
        self._read: set[str] = set()
        self._read_kinds: set[str] = set()

    @staticmethod
    def from_yaml(kind: str, body: Any, source: Path) -> Entity:
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise LaunchError(f"{source.name}: '{kind}' must be a mapping, got {brief(repr(body))}")
        attrs: dict[str, str] = {}
        elements: list[Entity] = []
        for key, value in body.items():
            key = str(key)
            if key == "children":
                if not isinstance(value, list | None):
                    raise LaunchError(f"{source.name}: '{kind}.children' must be a list of actions")
                elements += [Entity.from_yaml(*_single_key(c, source), source) for c in value or []]
            elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
                elements += [Entity.from_yaml(key, v, source) for v in value]
            elif isinstance(value, bool):
                attrs[key] = "true" if value else "false"
            elif isinstance(value, str | int | float):
                attrs[key] = str(value)
            else:
                raise LaunchError(f"{source.name}: '{kind}.{key}' must be a scalar or a list of mappings")
        return Entity(kind, attrs, elements, source)

    def describe(self) -> str:
        label = next((self.attrs[k] for k in ("name", "exec", "file", "cmd") if k in self.attrs), "")
        return f"{self.source.name}: <{self.kind}{' ' + brief(label) if label else ''}>"

    def attr(self, name: str) -> str | None:
        self._read.add(name)
        return self.attrs.get(name)

    def required(self, name: str) -> str:
        value = self.attr(name)
        if value is None:
            raise LaunchError(f"{self.describe()} needs a '{name}' attribute")
        return value

    def nested(self, kind: str) -> list[Entity]:
        self._read_kinds.add(kind)
        return [e for e in self.elements if e.kind == kind]

    def children(self, *, skip: tuple[str, ...] = ()) -> list[Entity]:
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
            f"{source.name}: each action must be a mapping with one key (its tag), got {brief(repr(item))}"
        )
    ((kind, body),) = item.items()
    return str(kind), body


def load_yaml(text: str, what: str, limits: LaunchLimits) -> Any:
    """``yaml.safe_load`` without aliases and with bounded nesting; ``what`` names the file or value.

    An alias is refused rather than counted: nine anchors of ten aliases each are a 1.3 kB file that
    expands to a billion nodes. The events are checked before anything is built, so neither the
    composer's recursion nor the expansion is ever reached."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_YAML_LOADER):
            if isinstance(event, yaml.AliasEvent):
                raise LaunchError(
                    f"{what}: YAML alias *{brief(str(event.anchor))}{_at(event.start_mark)}: "
                    "aliases are not allowed in launch files; write the value out"
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > limits.max_depth:
                    raise LaunchError(
                        f"{what}: YAML nested deeper than {limits.max_depth} levels"
                        f"{_at(event.start_mark)} (limit {limits.max_depth})"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        raise LaunchError(f"{what}: {_yaml_problem(exc, limits)}") from None
    except ValueError as exc:
        # What the safe constructor cannot convert: an integer of 5,000 digits, a date 2001-02-30.
        raise LaunchError(f"{what}: not valid YAML: {brief(str(exc), 120)}") from None


def _at(mark: Any) -> str:
    """Where a YAML event or error is, for a message (libyaml's and PyYAML's marks alike)."""
    return f" at line {mark.line + 1}" if mark is not None else ""


def _yaml_problem(exc: yaml.YAMLError, limits: LaunchLimits) -> str:
    """A YAML error on one line: what is wrong and where (PyYAML's text spans several lines)."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"not valid YAML: {brief(str(exc), 120)}"
    where = _at(exc.problem_mark or exc.context_mark)
    if exc.problem == "exceeded maximum nesting depth":
        # libyaml's own bound (1,000 flow levels), met while its scanner looks ahead of our check.
        return f"YAML nested deeper than {limits.max_depth} levels{where} (limit {limits.max_depth})"
    context = f" {exc.context}" if exc.context else ""
    return f"not valid YAML: {brief(exc.problem or 'malformed', 120)}{context}{where}"


def _xml_name(name: str) -> str:
    """ElementTree's spelling of a namespaced name (``{uri}tag``), which expat reports as ``uri}tag``."""
    return "{" + name if "}" in name else name


def _parse_xml(text: str, path: Path, limits: LaunchLimits) -> Entity:
    """The root tag of an XML launch file. expat directly rather than ElementTree: its handlers see
    each tag as it opens, so depth is refused before a tree exists, and entity declarations (the
    "billion laughs") are refused at the first one."""
    parser = expat.ParserCreate(namespace_separator="}")
    open_tags: list[Entity] = []
    roots: list[Entity] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        if len(open_tags) >= limits.max_depth:
            raise LaunchError(
                f"{path.name}: tags nested deeper than {limits.max_depth} levels at line "
                f"{parser.CurrentLineNumber} (limit {limits.max_depth})"
            )
        entity = Entity(_xml_name(tag), {_xml_name(k): v for k, v in attrs.items()}, [], path)
        (open_tags[-1].elements if open_tags else roots).append(entity)
        open_tags.append(entity)

    def end(tag: str) -> None:
        open_tags.pop()

    def entity_declaration(name: str, *_: object) -> None:
        raise LaunchError(
            f"{path.name}: XML entity declaration '{brief(name)}' at line {parser.CurrentLineNumber}: "
            "entity declarations are not allowed in launch files"
        )

    def doctype(name: str, system_id: str | None, public_id: str | None, internal: bool) -> None:
        # expat reads no external DTD and silently drops an attribute's reference to an entity
        # declared there: refuse the DTD instead of running a command with a word missing.
        if system_id or public_id:
            raise LaunchError(
                f"{path.name}: external DTD {brief(system_id or public_id or '')!r}: "
                "launch files may not reference one"
            )

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.EntityDeclHandler = entity_declaration
    parser.StartDoctypeDeclHandler = doctype
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise LaunchError(f"{path.name}: not valid XML: {exc}") from None
    return roots[0]


class LaunchFiles:
    """Reads launch files into entities, counting the bytes one launch reads against its limits."""

    def __init__(self, limits: LaunchLimits) -> None:
        self.limits = limits
        self.bytes_read = 0

    def load(self, path: Path) -> list[Entity]:
        """The actions of a launch file."""
        text = self._read(path)
        if path.suffix in (".yaml", ".yml"):
            data = load_yaml(text, path.name, self.limits)
            if not isinstance(data, dict) or set(data) != {"launch"}:
                raise LaunchError(f"{path.name}: a YAML launch file is one mapping with the key 'launch'")
            if not isinstance(data["launch"], list | None):
                raise LaunchError(f"{path.name}: 'launch' must be a list of actions")
            return [Entity.from_yaml(*_single_key(item, path), path) for item in data["launch"] or []]
        entity = _parse_xml(text, path, self.limits)
        if entity.kind != "launch":
            raise LaunchError(f"{path.name}: the root tag must be <launch>, got <{brief(entity.kind)}>")
        entity.attr("deprecated")
        entity.attr("version")
        children = entity.children()
        entity.check_read("deprecated, version")
        return children

    def _read(self, path: Path) -> str:
        if path.suffix == ".py":
            raise LaunchError(
                f"{path.name} is a Python launch file: it needs the ROS 2 launch library (ros2 launch on a "
                "ROS 2 machine); robolearn launch runs XML (.launch.xml) and YAML (.launch.yaml) files"
            )
        if not path.is_file():
            raise LaunchError(f"launch file not found: {path}")
        limit = self.limits.max_file_bytes
        try:
            with path.open("rb") as file:
                data = file.read(limit + 1)  # never more than one byte past the limit
        except OSError as exc:
            raise LaunchError(f"cannot read launch file {path}: {exc.strerror}") from None
        if len(data) > limit:
            raise LaunchError(f"{path.name}: larger than {limit} bytes (limit for one launch file)")
        self.bytes_read += len(data)
        if self.bytes_read > self.limits.max_read_bytes:
            raise LaunchError(
                f"{path.name}: this launch reads more than {self.limits.max_read_bytes} bytes of launch "
                "files (limit; a file included N times counts N times)"
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LaunchError(
                f"{path.name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                "launch files must be UTF-8"
            ) from None
