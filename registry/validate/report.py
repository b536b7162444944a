"""`recipe validate`: compose, validate and summarise one target, or every bundled file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from registry.compose import compose
from registry.errors import Exit, RecipeError
from registry.load import load_cached
from registry.names import AXES
from registry.sharing import sources
from registry.validate import CATALOG, ROOT, Problem, validate


@dataclass
class Report:
    target: str
    problems: list[Problem] = field(default_factory=list)
    failure: RecipeError | None = None  # the recipe could not even be composed

    @property
    def errors(self) -> int:
        return sum(p.is_error for p in self.problems)

    @property
    def warnings(self) -> int:
        return len(self.problems) - self.errors

    @property
    def exit_code(self) -> int:
        if self.failure:
            return self.failure.exit_code
        return Exit.INVALID if self.errors else Exit.OK

    def lines(self) -> list[str]:
        if self.failure:
            return [self.failure.render(prefix=self.target)]
        return [p.render() for p in self.problems]

    def summary(self) -> str:
        if self.failure:
            return (
                f"{self.target}: invalid" if self.failure.exit_code == Exit.INVALID else f"{self.target}: not validated"
            )
        if self.errors:
            return f"{self.target}: invalid ({_count(self.errors, 'error')}, {_count(self.warnings, 'warning')})"
        return f"{self.target}: valid" + (f" ({_count(self.warnings, 'warning')})" if self.warnings else "")


def validate_target(target: str, overrides: list[str] | None = None) -> Report:
    try:
        recipe = compose(target, overrides)
    except RecipeError as e:
        return Report(target, failure=e)
    return Report(target, validate(recipe.data, recipe.origins, composed=recipe.key))


def validate_all() -> Iterator[Report]:
    """Every file of every source on its own (structure), then every overlay and free-standing
    recipe composed (structure and invariants)."""
    for source in sources.all_sources():
        catalog = source.file(("catalog", "gpus"))
        if catalog:
            yield _file_report(catalog, CATALOG)
        for axis in AXES:
            for part in source.parts(axis):
                yield _file_report(source.file((axis, part)), ROOT)
        for cell in source.overlays():
            yield validate_target(f"{source.name}:{'/'.join(cell)}" if source.name != "bundled" else "/".join(cell))
        for name in source.free_standing():
            yield validate_target(name)
        yield from _published(source)


def _published(source) -> Iterator[Report]:
    from registry.sharing import versions

    for name in versions.index(source):
        for version in versions.versions(source, name):
            target = f"{source.name}:{name}@{version.number}"
            try:
                versions.verified(version)
            except RecipeError as e:
                yield Report(target, failure=e)
                continue
            yield validate_target(target)


def _file_report(path, ref: str) -> Report:
    try:
        doc = load_cached(path)
    except RecipeError as e:
        return Report(str(path), failure=e)
    return Report(doc.file, validate(doc.data, doc.origins, ref))


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"
