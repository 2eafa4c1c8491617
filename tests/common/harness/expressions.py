"""GitHub Actions' expression language, the part the workflows use in concurrency groups: to
evaluate a group for given contexts in a test (names, 'literals', numbers, null/true/false,
``!``, ``==``, ``!=``, ``&&``, ``||``, parentheses, ``format()`` and ``toJSON()``), with GitHub's
rules: ``&&`` yields its first falsy operand or its last, ``||`` its first truthy operand or its
last; '', 0, null and false are falsy; a missing property is null."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>&&|\|\||==|!=|!|\(|\)|,)"
    r"|(?P<name>[A-Za-z_][\w.-]*))"
)


def evaluate(text: str, contexts: Mapping[str, Any]) -> Any:
    """The value of one expression (the text inside ``${{ }}``)."""
    tokens = [m for m in _TOKEN.finditer(text) if m.group().strip()]
    parser = _Parser([m.group().strip() for m in tokens], contexts)
    value = parser.either()
    assert parser.at == len(parser.tokens), f"unparsed: {parser.tokens[parser.at :]}"
    return value


def render(value: str, contexts: Mapping[str, Any]) -> str:
    """A workflow string with each ``${{ }}`` replaced by its value, as GitHub renders it."""
    return re.sub(
        r"\$\{\{(.*?)\}\}", lambda m: _text(evaluate(m.group(1), contexts)), value, flags=re.S
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Parser:
    def __init__(self, tokens: list[str], contexts: Mapping[str, Any]) -> None:
        self.tokens, self.contexts, self.at = tokens, contexts, 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        self.at += 1
        return self.tokens[self.at - 1]

    def either(self) -> Any:
        value = self.both()
        while self.peek() == "||":
            self.take()
            other = self.both()
            value = value if value else other
        return value

    def both(self) -> Any:
        value = self.compared()
        while self.peek() == "&&":
            self.take()
            other = self.compared()
            value = other if value else value
        return value

    def compared(self) -> Any:
        value = self.unary()
        while self.peek() in ("==", "!="):
            op, other = self.take(), self.unary()
            value = (value == other) if op == "==" else (value != other)
        return value

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not self.unary()
        return self.atom()

    def atom(self) -> Any:
        token = self.take()
        if token == "(":
            value = self.either()
            assert self.take() == ")"
            return value
        if token.startswith("'"):
            return token[1:-1].replace("''", "'")
        if token[0].isdigit():
            return float(token) if "." in token else int(token)
        if token in ("null", "true", "false"):
            return {"null": None, "true": True, "false": False}[token]
        if self.peek() == "(":
            return self.call(token)
        return self.lookup(token)

    def call(self, name: str) -> Any:
        self.take()
        args = [] if self.peek() == ")" else [self.either()]
        while self.peek() == ",":
            self.take()
            args.append(self.either())
        assert self.take() == ")"
        if name == "format":
            return re.sub(r"\{(\d+)\}", lambda m: _text(args[1 + int(m.group(1))]), args[0])
        if name == "toJSON":
            return json.dumps(args[0])
        raise AssertionError(f"function {name} is not evaluated here")

    def lookup(self, path: str) -> Any:
        value: Any = self.contexts
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return value
