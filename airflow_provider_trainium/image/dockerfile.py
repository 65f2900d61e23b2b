"""Which context paths a Dockerfile reads: the sources of COPY/ADD and of RUN bind mounts.

Only these files go into the context hash and the staged context, so a change anywhere else in the
repository never triggers a rebuild, and anything the parser missed fails the build loudly.
"""

from __future__ import annotations

import json
import re
import shlex

from airflow_provider_trainium.image.errors import ContextError

_DIRECTIVE = re.compile(r"^#\s*escape\s*=\s*(\S)\s*$", re.IGNORECASE)
_HEREDOC = re.compile(r"<<-?\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-+][^}]*)?\}|([A-Za-z_][A-Za-z0-9_]*))")
_URL = re.compile(r"^(?:https?://|git@|git://)")


def logical_lines(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) pairs with continuations joined, comments and heredoc bodies dropped."""
    lines = text.splitlines()
    escape = "\\"
    for line in lines:  # parser directives come first, before any instruction or blank line
        match = _DIRECTIVE.match(line.strip())
        if not match:
            break
        escape = match.group(1)
    result: list[tuple[str, str]] = []
    buffer = ""
    heredoc_end: list[str] = []
    for line in lines:
        if heredoc_end:
            if line.strip() == heredoc_end[0]:
                heredoc_end.pop(0)
            continue
        stripped = line.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue  # comment lines inside a continuation are skipped by the engine too
        if stripped.endswith(escape):
            buffer += stripped[: -len(escape)] + " "
            continue
        full = (buffer + stripped).strip()
        buffer = ""
        if not full:
            continue
        instruction, _, rest = full.partition(" ")
        instruction = instruction.upper()
        result.append((instruction, rest.strip()))
        if instruction in ("RUN", "COPY", "ADD"):
            heredoc_end.extend(_HEREDOC.findall(rest))
    if buffer.strip():
        instruction, _, rest = buffer.strip().partition(" ")
        result.append((instruction.upper(), rest.strip()))
    return result


def _expand(value: str, variables: dict[str, str]) -> str:
    return _VAR.sub(lambda m: variables.get(m.group(1) or m.group(2), ""), value)


def _split_flags(rest: str) -> tuple[list[str], list[str]]:
    """(flags, arguments) of a COPY/ADD line in shell or JSON form."""
    flags: list[str] = []
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.lstrip()
    if rest.startswith("["):
        try:
            args = json.loads(rest)
        except json.JSONDecodeError as exc:
            raise ContextError(f"cannot parse JSON form {rest!r}: {exc}") from None
        return flags, [str(a) for a in args]
    return flags, rest.split()


def _bind_mount_sources(rest: str) -> list[str]:
    """Context paths of ``RUN --mount=type=bind`` (the default type) without ``from=``."""
    sources: list[str] = []
    try:
        tokens = shlex.split(rest)
    except ValueError:
        tokens = rest.split()
    for token in tokens:
        if not token.startswith("--mount="):
            if not token.startswith("--"):
                break
            continue
        options = {key: value for key, _, value in (kv.partition("=") for kv in token[len("--mount=") :].split(","))}
        if options.get("type", "bind") == "bind" and "from" not in options:
            sources.append(options.get("source") or options.get("src") or ".")
    return sources


def context_sources(text: str, build_args: dict[str, str] | None = None) -> list[str]:
    """Every context-relative source path or glob the Dockerfile reads, in order of appearance."""
    build_args = build_args or {}
    global_args: dict[str, str] = {}  # ARGs before the first FROM; a stage sees them only if redeclared
    variables: dict[str, str] = global_args
    sources: list[str] = []
    for instruction, rest in logical_lines(text):
        if instruction == "FROM":
            variables = {}
        elif instruction == "ARG":
            for item in rest.split():
                name, sep, default = item.partition("=")
                fallback = default.strip("\"'") if sep else global_args.get(name, "")
                variables[name] = build_args.get(name, fallback)
        elif instruction == "ENV":
            for name, value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)", rest):
                variables[name] = value.strip("\"'")
        elif instruction in ("COPY", "ADD"):
            flags, args = _split_flags(rest)
            if any(f.startswith("--from=") for f in flags):
                continue
            for arg in args[:-1]:
                if arg.startswith("<<"):
                    continue
                value = _expand(arg, variables)
                if instruction == "ADD" and _URL.match(value):
                    continue
                sources.append(value)
        elif instruction == "RUN":
            sources.extend(_expand(s, variables) for s in _bind_mount_sources(rest))
    return sources


def base_image(text: str, build_args: dict[str, str] | None = None, target: str | None = None) -> str | None:
    """The external image the built stage (``target``, else the last) starts from; None for ``scratch``.

    Builders pull it first to learn its digest. ``FROM <stage>`` is followed back to the stage's own base;
    only the ARGs declared before the first FROM expand a FROM line, as in the engine.
    """
    build_args = build_args or {}
    global_args: dict[str, str] = {}
    stages: dict[str, str] = {}  # alias -> image the stage starts from (already resolved through aliases)
    chosen: str | None = None
    seen_from = False
    for instruction, rest in logical_lines(text):
        if instruction == "ARG" and not seen_from:
            for item in rest.split():
                name, sep, default = item.partition("=")
                global_args[name] = build_args.get(name, default.strip("\"'") if sep else "")
        elif instruction == "FROM":
            seen_from = True
            words = [w for w in rest.split() if not w.startswith("--")]
            if not words:
                raise ContextError(f"FROM without an image: {rest!r}")
            image = _expand(words[0], global_args)
            image = stages.get(image.lower(), image)
            if len(words) >= 3 and words[1].upper() == "AS":
                stages[words[2].lower()] = image
                if target is not None and words[2].lower() == target.lower():
                    return None if image == "scratch" else image
            chosen = image
    if target is not None:
        return None  # no such stage: the build itself fails and says so
    return None if chosen in (None, "scratch") else chosen
