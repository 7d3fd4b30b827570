"""docs/api.md: every public name of pva with its members, generated from the package itself.

Run `python -m tests.support.api_reference > docs/api.md` after adding or renaming a public name;
tests/test_docs.py checks that every name and member appears there.
"""

from __future__ import annotations

import enum
import inspect

import pva

INTRO = """# API reference

Every public name of the `pva` package, with its members. Names in camelCase are libpva's own,
spelt as Graphcore's PopVision Analysis library spells them, so scripts written for it run
unmodified; names in snake_case are pva additions. The [guide](guide.md) shows them in use.
"""


def _first_paragraph(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n")[0].replace("\n", " ").replace("|", "/").strip()


def public_names() -> list[str]:
    """Names exported by `pva`, in its order."""
    return [name for name in pva.__all__ if name not in ("__version__", "pva_core")]


def members(cls: type) -> list[tuple[str, str]]:
    """(member as written, what it is) for every public member of a class."""
    out = []
    for name, value in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(value, type) and issubclass(value, enum.Enum):
            out.append((name, "enum: " + ", ".join(value.__members__)))
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, property) or type(raw).__name__ == "cached_property":
            out.append((name, _first_paragraph(raw.__doc__)))
        elif callable(raw) or isinstance(raw, (staticmethod, classmethod)):
            bound = getattr(cls, name)
            try:
                signature = str(inspect.signature(bound)).replace("(self, ", "(").replace("(self)", "()")
            except (TypeError, ValueError):
                signature = "(...)"
            out.append((name + signature, _first_paragraph(inspect.getdoc(bound))))
    return out


def render() -> str:
    """The whole of docs/api.md."""
    lines = [INTRO]
    by_module: dict[str, list[str]] = {}
    for name in public_names():
        by_module.setdefault(getattr(getattr(pva, name), "__module__", "pva") or "pva", []).append(name)
    for module in sorted(by_module):
        shown = "pva" if module.startswith("formats") else module
        lines += [f"## `{shown}`" + (" (errors)" if module.startswith("formats") else ""), ""]
        for name in by_module[module]:
            obj = getattr(pva, name)
            if inspect.isclass(obj):
                lines += [f"### `pva.{name}`", "", _first_paragraph(obj.__doc__), ""]
                if not issubclass(obj, BaseException):
                    rows = members(obj)
                    if rows:
                        lines += ["| member | what |", "|---|---|"]
                        lines += [f"| `{member}` | {what} |" for member, what in rows]
                        lines.append("")
            elif callable(obj):
                try:
                    signature = str(inspect.signature(obj))
                except (TypeError, ValueError):
                    signature = "(...)"
                lines += [f"### `pva.{name}{signature}`", "", _first_paragraph(obj.__doc__), ""]
            else:
                lines += [f"### `pva.{name}`", "", f"A constant ({type(obj).__name__}).", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
