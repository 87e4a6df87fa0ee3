"""The ``sasl.jaas.config`` syntax, as Kafka's ``JaasConfig`` reads it.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

One or more login modules, each a class name, a control flag (``required``,
``requisite``, ``sufficient``, ``optional``) and ``name=value`` options, ended
by ``;``. Values are quoted (``"..."``, with ``\\"`` and ``\\\\`` escapes) or
single words. Option values are secrets: no message here ever quotes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """The text is not a JAAS configuration; the message names no option value."""


@dataclass
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict, repr=False)


def _tokens(text: str):
    """(kind, text) tokens: word, string, '=', ';'."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            yield c, c
            i += 1
        elif c == '"':
            out = []
            i += 1
            while True:
                if i >= n:
                    raise JaasError("a quoted value is not closed")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    out.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    out.append(c)
                    i += 1
            yield "string", "".join(out)
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            yield "word", text[start:i]


def parse(text: str) -> list[LoginModule]:
    """The login modules of a ``sasl.jaas.config`` value; JaasError if malformed."""
    tokens = list(_tokens(text))
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        kind, name = tokens[i]
        if kind != "word":
            raise JaasError("expected a login module class name")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word" or tokens[i + 1][1].lower() not in FLAGS:
            raise JaasError(f"login module {name}: expected a control flag ({', '.join(FLAGS)}) after the class name")
        module = LoginModule(name, tokens[i + 1][1].lower())
        i += 2
        while True:
            if i >= len(tokens):
                raise JaasError(f"login module {name}: expected ';' at the end")
            kind, key = tokens[i]
            if kind == ";":
                i += 1
                break
            if kind != "word" or i + 2 >= len(tokens) or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in ("word", "string"):
                raise JaasError(f"login module {name}: expected name=value options, then ';'")
            if key in module.options:
                raise JaasError(f"login module {name}: option {key} is given twice")
            module.options[key] = tokens[i + 2][1]
            i += 3
        modules.append(module)
    if not modules:
        raise JaasError("no login module")
    return modules
