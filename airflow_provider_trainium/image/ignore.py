""".dockerignore matching with the engine's semantics.

Patterns are paths relative to the context root with ``*``, ``?``, ``[...]`` and ``**``; a pattern that
matches a directory excludes everything below it; ``!pattern`` re-includes; the last matching line wins.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

GLOB_CHARS = frozenset("*?[")


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a slash-separated glob (``**`` spans directories, ``*`` does not) to an anchored regex."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):
                    i += 1
                    out.append("(?:.*/)?")
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith(("[^", "[!"), i) else i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$")


def matches_or_parent(regex: re.Pattern[str], path: str) -> bool:
    """True when ``path`` or one of its parent directories matches."""
    if regex.match(path):
        return True
    parts = path.split("/")
    return any(regex.match("/".join(parts[:i])) for i in range(1, len(parts)))


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    exclusion: bool


class IgnoreRules:
    """The rules of one ignore file; ``excluded(path)`` answers for a context-relative posix path."""

    def __init__(self, lines: list[str] | tuple[str, ...] = ()) -> None:
        rules: list[_Rule] = []
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            exclusion = line.startswith("!")
            if exclusion:
                line = line[1:].strip()
            line = posixpath.normpath(line).lstrip("/")
            if line in ("", "."):
                continue
            rules.append(_Rule(glob_to_regex(line), exclusion))
        self._rules = tuple(rules)

    @classmethod
    def from_context(cls, root: Path) -> IgnoreRules:
        path = root / ".dockerignore"
        if not path.is_file():
            return cls()
        return cls(path.read_text(encoding="utf-8").splitlines())

    @property
    def has_exceptions(self) -> bool:
        return any(rule.exclusion for rule in self._rules)

    def excluded(self, path: str) -> bool:
        matched = False
        for rule in self._rules:
            # An inclusion only matters while unmatched, an exception only once matched.
            if rule.exclusion != matched:
                continue
            if matches_or_parent(rule.regex, path):
                matched = not rule.exclusion
        return matched
