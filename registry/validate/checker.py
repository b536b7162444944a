"""The schema checker: JSON Schema 2020-12 as the schemas in schemas/ and team rule files use it,
without jsonschema's import (80 ms of a 110 ms `recipe validate`; docs/design.md, "Speed").

Each subschema is planned once (its keywords, in the order written, with their functions) and each
`$ref` resolved once per scope. The standard keywords it implements are in
registry/validate/standard.py (STANDARD); the project's own in registry/validate/keywords.py.

Errors carry what jsonschema's ValidationError carries (message, validator, validator_value,
instance, schema, path, schema_path, context) and `best_match` picks one as jsonschema's does:
the messages, paths and choices are jsonschema's, checked by tests/test_checker.py against
jsonschema itself.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

_UNSET = object()


class Error:
    """One validation error, shaped as jsonschema's ValidationError."""

    __slots__ = (
        "context",
        "instance",
        "message",
        "parent",
        "path",
        "schema",
        "schema_path",
        "validator",
        "validator_value",
    )

    def __init__(
        self, message, validator=_UNSET, validator_value=_UNSET, instance=_UNSET, schema=_UNSET, path=(), context=()
    ):
        self.message = message
        self.validator = validator
        self.validator_value = validator_value
        self.instance = instance
        self.schema = schema
        self.path = deque(path)
        self.schema_path = deque()
        self.context = list(context)
        self.parent = None
        for error in self.context:
            error.parent = self

    def _set(self, **fields) -> None:
        for name, value in fields.items():
            if name in self.__slots__ and getattr(self, name) is _UNSET:
                setattr(self, name, value)

    @property
    def relative_path(self) -> deque:
        return self.path

    @property
    def absolute_path(self) -> deque:
        if self.parent is None:
            return self.path
        path = deque(self.path)
        path.extendleft(reversed(self.parent.absolute_path))
        return path

    def _matches_type(self) -> bool:
        try:
            expected = self.schema["type"]
        except (KeyError, TypeError):
            return False
        return any(is_type(self.instance, t) for t in ([expected] if isinstance(expected, str) else expected))

    def __repr__(self) -> str:
        return f"<Error {self.validator!r} at {list(self.absolute_path)}: {self.message!r}>"


WEAK = frozenset(("anyOf", "oneOf"))


def relevance(error) -> tuple:
    """jsonschema's order of relevance: deeper, then earlier, then not a weak keyword, then an
    error on a value of the subschema's own type."""
    return (-len(error.path), error.path, error.validator not in WEAK, False, not error._matches_type())


def best_match(errors):
    """The most relevant error, descending into a combinator's context while one of its errors
    is more relevant than the rest (jsonschema.exceptions.best_match)."""
    best = max(errors, key=relevance, default=None)
    if best is None:
        return None
    while best.context:
        smallest = heapq.nsmallest(2, best.context, key=relevance)
        if len(smallest) == 2 and relevance(smallest[0]) == relevance(smallest[1]):
            return best
        best = smallest[0]
    return best


def _finite_number(instance) -> bool:
    """JSON's numbers: NaN and infinity are not numbers in a recipe (JSON has neither)."""
    if isinstance(instance, float):
        return math.isfinite(instance)
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # an integer is an int: JSON Schema also counts 8.0, which then reaches a launcher as
    # `--num_processes 16.0` or a batch product as a float (docs/failure-modes.md §34)
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": _finite_number,
}


def is_type(instance, name: str) -> bool:
    try:
        return _TYPES[name](instance)
    except KeyError:
        raise ValueError(f"unknown type {name!r}") from None


def equal(one, two) -> bool:
    """JSON equality: True is not 1, [1] is not (1,) only by length and items."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, (list, tuple)) and isinstance(two, (list, tuple)):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return one == two


class Checker:
    """Validates instances against one schema, read in the scope of one schema document.

    `documents`: schema file name -> document, what a `$ref` names; `base`: the document the
    schema is read in ("" for a schema of its own, whose "#" is itself); `keywords`: keyword ->
    function(checker, value, instance, schema) yielding Errors, jsonschema's signature."""

    def __init__(self, schema, documents: dict, keywords: dict, base: str = "", _shared=None):
        self.schema = schema
        self.base = base
        self._shared = _shared or _Shared(documents, keywords, schema)

    def iter_errors(self, instance):
        return self.descend(instance, self.schema)

    def is_valid(self, instance) -> bool:
        return next(self.iter_errors(instance), None) is None

    def evolve(self, schema) -> Checker:
        return Checker(schema, None, None, self.base, self._shared)

    def descend(self, instance, schema, path=None, schema_path=None):
        if schema is True:
            return
        if schema is False:
            yield Error(f"False schema does not allow {instance!r}", None, None, instance, schema)
            return
        for keyword, function, value in self._shared.plan(schema):
            for error in function(self, value, instance, schema):
                error._set(validator=keyword, validator_value=value, instance=instance, schema=schema)
                if keyword not in ("if", "$ref"):
                    error.schema_path.appendleft(keyword)
                if path is not None:
                    error.path.appendleft(path)
                if schema_path is not None:
                    error.schema_path.appendleft(schema_path)
                yield error

    def resolve(self, ref: str) -> tuple[object, Checker]:
        """What a `$ref` read here names, and a checker in its document's scope; LookupError
        where it names nothing."""
        return self._shared.resolve(self, ref)


class _Shared:
    """What every checker evolved from one root shares: the plans and the resolved references."""

    def __init__(self, documents: dict, keywords: dict, root):
        self.documents = documents
        self.keywords = keywords
        self.root = root
        self.plans: dict[int, tuple] = {}
        self.refs: dict[tuple[str, str], tuple] = {}
        self.scopes: dict[str, Checker] = {}

    def plan(self, schema) -> list:
        entry = self.plans.get(id(schema))
        if entry is None or entry[0] is not schema:
            if not isinstance(schema, dict):
                raise TypeError(f"a schema is an object or a boolean, not {schema!r}")
            get = self.keywords.get
            entry = (schema, [(k, get(k), v) for k, v in schema.items() if get(k) is not None])
            self.plans[id(schema)] = entry
        return entry[1]

    def resolve(self, checker: Checker, ref: str) -> tuple[object, Checker]:
        key = (checker.base, ref)
        found = self.refs.get(key)
        if found is None:
            name, _, pointer = ref.partition("#")
            name = name or checker.base
            if name:
                if name not in self.documents:
                    raise LookupError(f"unresolvable $ref {ref!r}: no schema named {name!r}")
                target = self.documents[name]
            else:
                target = self.root
            for token in filter(None, pointer.split("/")) if pointer else ():
                token = _unescape(token)
                try:
                    target = target[int(token)] if isinstance(target, list) else target[token]
                except (KeyError, IndexError, ValueError, TypeError):
                    raise LookupError(f"unresolvable $ref {ref!r}: no {token!r} in it") from None
            scope = self.scopes.get(name)
            if scope is None:
                scope = self.scopes[name] = Checker(self.root, None, None, name, self)
            found = self.refs[key] = (target, scope)
        return found


def _unescape(token: str) -> str:
    from urllib.parse import unquote

    return unquote(token).replace("~1", "/").replace("~0", "~")
