"""The toolkit's own YAML files, read with the line of every value and checked against a JSON Schema.

A wrong value in packages/gdrcopy.yaml or ci/matrix.yaml is refused with the
file, the line, the field (`deb[libgdrapi].depends`) and what to do,
taken from the schema's `description` of that field; nothing is built first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from gdrkit.system import bad_input, die


@dataclass(frozen=True)
class Document:
    """A YAML file's data and the node tree that knows where each value is."""

    path: Path
    data: Any
    root: yaml.Node | None

    def line(self, where: Sequence[str | int]) -> int:
        """The 1-based line of the value at `where` (keys and list indexes), or of its nearest parent."""
        node = self.root
        line = 1
        for part in where:
            if node is None:
                break
            line = node.start_mark.line + 1
            if isinstance(node, yaml.MappingNode):
                node = next((value for key, value in node.value if key.value == str(part)), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                node = None
        return node.start_mark.line + 1 if node is not None else line

    def field(self, where: Sequence[str | int]) -> str:
        """`where` as a person names it: list entries by their `name` (`deb[libgdrapi].depends`)."""
        segments: list[str] = []
        value = self.data
        for part in where:
            if isinstance(part, int):
                item = value[part] if isinstance(value, list) and part < len(value) else None
                name = item.get("name") if isinstance(item, Mapping) else None
                segments.append(f"{segments.pop() if segments else ''}[{name or part + 1}]")
                value = item
            else:
                segments.append(str(part))
                value = value.get(part) if isinstance(value, Mapping) else None
        return ".".join(segments) or "the top level"


def read(path: Path) -> Document:
    """The file's data and places; a file that is not YAML is refused with the line yaml names."""
    try:
        text = path.read_text()
    except OSError as error:
        raise die(f"cannot read {path}: {error}") from None
    try:
        return Document(path, yaml.safe_load(text), yaml.compose(text))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise bad_input(f"{path}{line}: not valid YAML ({error})", "fix the syntax at that line") from None


def _resolve(schema: Mapping[str, Any], node: Any) -> Any:
    """`node` with a local `$ref` (#/$defs/name) followed."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target: Any = schema
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def _description(schema: Mapping[str, Any], where: Sequence[str | int]) -> str:
    """The schema's description of the value at `where`, or of the nearest enclosing value that has one."""
    found = str(schema.get("description", ""))
    node: Any = schema
    for part in where:
        node = _resolve(schema, node)
        if not isinstance(node, Mapping):
            break
        if isinstance(part, int):
            node = node.get("items")
        else:
            properties = node.get("properties") or {}
            node = properties.get(part, node.get("additionalProperties"))
        for candidate in (node, _resolve(schema, node)):
            if isinstance(candidate, Mapping) and candidate.get("description"):
                found = str(candidate["description"])
                break
    return found or "compare it with the comments at the top of the file"


_KINDS = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a mapping",
}


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(str(key) for key in error.instance if key not in allowed)
        return f"unknown key {', '.join(map(repr, unknown))}: check its spelling"
    if error.validator == "required":
        return str(error.message).replace("is a required property", "is missing (a required key)")
    if error.validator == "type":
        wanted = error.validator_value
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        described = {"string": "a string", "integer": "an integer", "boolean": "true or false", "array": "a list"}
        expected = " or ".join(described.get(n, f"a {n}") for n in names)
        got = "empty" if error.instance is None else _KINDS.get(type(error.instance), type(error.instance).__name__)
        return f"{error.instance!r} is {got}, not {expected}"
    return str(error.message)


def check(document: Document, schema: Mapping[str, Any]) -> None:
    """Refuse the first (by place in the file) value that does not match `schema`: file, line, field, what to do."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(document.data), key=lambda e: document.line(list(e.absolute_path)))
    if not errors:
        return
    error = errors[0]
    where = list(error.absolute_path)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    hint = _description(schema, where)
    if error.validator == "additionalProperties":
        hint = f"{document.field(where)} takes: {', '.join(sorted(error.schema.get('properties', {})))}"
    raise bad_input(f"{document.path}:{document.line(where)}: {document.field(where)}: {_message(error)}{more}", hint)


def load_schema(path: Path) -> dict[str, Any]:
    schema = yaml.safe_load(path.read_text())
    assert isinstance(schema, dict), f"{path} is not a JSON Schema"
    return schema
