"""Exceptions that the CLI turns into one clear line and exit status 2.

Every error a user can fix (a bad file, a bad record, an unknown LM spec, a missing model file) is a
:class:`GroundstateError`. Its message is the whole story: what is wrong, where (file, record, field) and,
where it helps, how to fix it. Anything else that escapes is a bug and keeps its traceback.

Messages stay one line: text that comes from a data file (an id, a value, a field name) is passed through
:func:`one_line`, which escapes newlines, ANSI escape sequences, bidi overrides, line separators and every other
control or format character repr-style, so a data file can neither break the one-line contract, nor reorder what
the user reads, nor write to the user's terminal.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import unicodedata
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

#: Unicode categories a terminal can use to hide, reorder or break text: controls (Cc: newlines, ANSI escapes,
#: C1), format characters (Cf: the bidi overrides and isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E,
#: U+200F and U+061C, zero-width characters, the byte-order mark), the line and paragraph separators (Zl U+2028,
#: Zp U+2029) and lone surrogates (Cs).
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in UNSAFE_CATEGORIES


def one_line(text: Any, limit: int | None = 300) -> str:
    """``text`` made safe to print on one line of a terminal.

    Guarantees: the result holds no character of :data:`UNSAFE_CATEGORIES` (newlines, tabs, ANSI escapes, C1
    controls, bidi overrides such as U+202E, zero-width characters, U+2028/U+2029, surrogates); each is written
    repr-style instead (``\\n``, ``\\x1b``, ``\\u202e``), so a data file can neither break the one-line contract,
    nor reorder what the user reads, nor write to the user's terminal. The result is cut to ``limit`` characters
    (``None``: no cut).
    """
    shown = str(text)
    if not shown.isprintable() and any(_unsafe(ch) for ch in shown):
        shown = "".join(repr(ch)[1:-1] if _unsafe(ch) else ch for ch in shown)
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 3] + "..."
    return shown


class GroundstateError(Exception):
    """Base class for errors the user can fix; the CLI prints ``str(err)`` and exits 2."""

    exit_code = 2


class InputError(GroundstateError, ValueError):
    """Bad input data: names the file, the record and the field when they are known."""

    def __init__(self, message: str, *, file: str | None = None, record: str | int | None = None,
                 field: str | None = None):
        self.file, self.record, self.field = file, record, field
        where = []
        if file is not None:
            where.append(one_line(file))
        if record is not None:
            where.append(f"record {one_line(record, 120)}")
        if field is not None:
            where.append(f"field '{one_line(field, 120)}'")
        message = one_line(message, None)
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class LMSetupError(GroundstateError):
    """An LM cannot be built: unknown spec, missing model file, unreadable LM config."""


class ConfigError(GroundstateError):
    """A bad option or combination of options (unknown metric, zero budget, ...)."""


class LMCallError(GroundstateError):
    """A call to an LM failed (no server, refused key, unparseable reply, timeout): one line naming the LM."""


class RunInUseError(GroundstateError):
    """Another groundstate process holds the run directory's lock."""


class WorkerLostError(GroundstateError):
    """A Ray worker process died while it ran in-memory work (``consilience explore`` ...): nothing was written."""

    exit_code = 1


class OptimizationFailed(GroundstateError):
    """Every LM call (or metric call) of an optimization failed, so there is nothing worth saving."""


class CostCapReached(GroundstateError):
    """The priced spend of a piece of work reached its cap (``--max-cost``): a metered LM call was refused
    (:func:`groundstate.metering.cap_meter`), or an optimization stopped there with nothing to save. Exit status 1,
    as for a run stopped by ``--max-error-rate``: what was finished is kept."""

    exit_code = 1


# ---------------------------------------------------------------------------------------------------------
# Secrets never reach a message, a log line or a results file
# ---------------------------------------------------------------------------------------------------------

SECRET_VARIABLE = re.compile(r"(API_KEY|_TOKEN|_SECRET|ACCESS_KEY|PASSWORD|PASSWD)$", re.IGNORECASE)
"""Environment variables whose values are secrets (``OPENAI_API_KEY``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``,
``PGPASSWORD``)."""
MIN_SECRET_LENGTH = 8
REDACTED = "[redacted]"
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=:-]+")
_BASIC = re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?basic\s+)[A-Za-z0-9+/_-]+=*")
_SK_TOKEN = re.compile(r"\bsk-[A-Za-z0-9_-]{6,}")
_KEY_ASSIGNMENT = re.compile(r"(?i)\b((?:x-)?api[_-]?key[\"']?\s*[:=]\s*[\"']?)([^\s\"',;}]{6,})")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")  # up to the authority's last @
_REGISTERED: set[str] = set()


def strip_userinfo(text: Any) -> Any:
    """``text`` with the userinfo of every URL in it removed: ``http://user:pass@host/v1`` -> ``http://host/v1``.

    Works on a bare URL and on free text holding URLs; anything that is not a string is returned unchanged (so
    ``None`` stays ``None``). Only what is stored or printed goes through it: the LM itself keeps the URL it was
    given, so the server still receives the credentials.
    """
    if not isinstance(text, str) or "@" not in text:
        return text
    return _URL_USERINFO.sub(lambda m: m.group(1), text)


def register_secret(value: str) -> None:
    """Treat ``value`` as a secret from now on in this process (:func:`scrub_secrets` removes it and its
    encodings), like the value of a key variable. Values shorter than :data:`MIN_SECRET_LENGTH` are ignored:
    scrubbing a short common string would mangle ordinary text (URL userinfo is stripped whatever its length)."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
        _REGISTERED.add(value)


def register_url_secrets(url: Any) -> None:
    """Register the password of ``url``'s userinfo, and ``user:password`` (what HTTP Basic auth encodes), as
    secrets (:func:`register_secret`), both as written and percent-decoded."""
    if not isinstance(url, str) or "@" not in url:
        return
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return
    if parts.password:
        for user, password in {(parts.username or "", parts.password),
                               (unquote(parts.username or ""), unquote(parts.password))}:
            register_secret(password)
            register_secret(f"{user}:{password}")


def secret_values() -> list[str]:
    """The secret values in force, longest first: those of the secret environment variables
    (:data:`SECRET_VARIABLE`) and those given to :func:`register_secret`."""
    values = {v for k, v in os.environ.items() if SECRET_VARIABLE.search(k) and v and len(v) >= MIN_SECRET_LENGTH}
    return sorted(values | _REGISTERED, key=len, reverse=True)


@functools.lru_cache(maxsize=256)
def secret_forms(value: str) -> tuple[str, ...]:
    """The texts that give ``value`` away, longest first: the value itself, its URL-encodings (``%2B`` and
    ``%2b``, ``+`` or ``%20`` for spaces), its base64 encodings (standard and URL-safe alphabets, with and
    without padding), and the part of the base64 of *any* text containing ``value`` that only ``value``
    determines, at each of the three byte alignments.

    The last kind is what catches ``Basic <base64 of user:key>`` and a base64-encoded header or JSON body that
    holds the key: base64 maps 3 bytes to 4 characters, so once the key's start is known modulo 3, the groups of
    4 characters made only of the key's bytes are fixed whatever precedes or follows it. They are at least 8
    characters long for a key of :data:`MIN_SECRET_LENGTH` bytes; a character or two at each edge of such an
    encoding is left, which cannot give the key away. The same parts of the base64 of any text holding the key's
    own base64 are included too: a server that echoes ``Authorization: Basic <base64 of user:key>`` base64-encoded
    encodes the key twice.
    """
    def cores(raw: bytes) -> set[str]:
        found = set()
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            for shift in range(3):
                text = encode(b"\0" * shift + raw).decode("ascii")
                start, end = (4 if shift else 0), 4 * ((shift + len(raw)) // 3)
                if end - start >= 8:
                    found.add(text[start:end])
        return found

    raw = value.encode("utf-8")
    forms = {value} | cores(raw)
    for encoded in (quote(value, safe=""), quote(value), quote_plus(value)):
        forms |= {encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        forms |= {whole, whole.rstrip("=")} | cores(whole.rstrip("=").encode("ascii"))
    return tuple(sorted(forms, key=len, reverse=True))


def scrub_secrets(text: str) -> str:
    """``text`` with every secret replaced by ``[redacted]``.

    Removed: the value of every environment variable named like a key (``*API_KEY``, ``*_TOKEN``, ``*_SECRET``,
    ``*ACCESS_KEY``, ``*PASSWORD``, ``*PASSWD``; values of at least 8 characters) and of every registered secret
    (:func:`register_secret`: the passwords of LM URLs), each also in its URL-encoded and base64 forms
    (:func:`secret_forms`); ``Bearer <token>`` and ``Authorization: Basic <credentials>``; ``sk-...`` shaped keys;
    ``api_key=...`` / ``x-api-key: ...`` assignments; and the userinfo of every URL (:func:`strip_userinfo`).
    Apply it to any text that came back from an LM server (error bodies can echo the request's headers) before it
    is printed, logged or stored.
    """
    if not text:
        return text
    text = strip_userinfo(str(text))
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BASIC.sub(lambda m: m.group(1) + REDACTED, text)
    for value in secret_values():
        for form in secret_forms(value):
            if form in text:
                text = text.replace(form, REDACTED)
    text = _SK_TOKEN.sub(REDACTED, text)
    return _KEY_ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED if m.group(2) != REDACTED else m.group(0), text)


def redact_known_secrets(value: Any) -> Any:
    """``value`` (JSON-like data: strings, lists, dicts) with every known secret value, in every form
    :func:`secret_forms` lists, replaced by ``[redacted]`` in each string, keys included.

    For what a program *produced* (its outputs and trace, stored in ``results.jsonl``): an LM server can echo a key
    inside a reply that parses. Unlike :func:`scrub_secrets`, no pattern is applied (prose such as "the bearer of
    bad news" is left alone): only the values of the secrets in force are removed. Returns ``value`` itself when no
    secret is in force or none occurs.
    """
    secrets = secret_values()
    if not secrets:
        return value
    forms = [form for secret in secrets for form in secret_forms(secret)]

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            for form in forms:
                if form in item:
                    item = item.replace(form, REDACTED)
            return item
        if isinstance(item, dict):
            return {clean(k): clean(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [clean(v) for v in item]
        return item

    return clean(value)


def install_log_scrubbing() -> None:
    """Scrub secrets from every log record from now on (:func:`scrub_secrets` on its message and traceback), and
    make its message one safe line (:func:`one_line`: a record id or a server's reply inside a warning can carry
    newlines, escape sequences or bidi overrides; a traceback stays in the record's exception text).

    Libraries log the exceptions they catch (DSPy's evaluator and optimizers log each failed example, with the
    error text a server sent back), so the command line installs this once, before any command runs. It wraps
    the log record factory, which every logger and handler goes through; calling it again does nothing.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "scrubs_secrets", False):
        return

    def factory(*args, **kwargs):
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed log call: leave it to logging's own error handling
            return record
        record.msg, record.args = one_line(scrub_secrets(message), None), None  # a file's text cannot forge lines
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub_secrets(logging.Formatter().formatException(record.exc_info))
        return record

    factory.scrubs_secrets = True
    logging.setLogRecordFactory(factory)
