"""Keys kept out of everything the client shows or stores (text, exceptions, URLs): a server may echo the key in an
error body (some proxies answer a 401 with it unmasked), so every error is scrubbed before it leaves the client."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Optional
from urllib.parse import parse_qsl, urlencode, urlparse, urlunparse

from acemad_utils.data.settings import env

_SECRETS: set[str] = set()  # keys this process has been given (in memory only), for redact()
# sk-... at a word's start, or glued to a word ("keysk-proj-...") with 20+ characters and a digit ("risk-averse" stays)
_KEYLIKE = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-*.]{6,}|\B(sk|rk|pk)-(?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{20,}")
# RFC 6750 token characters (and our ***); Basic: an endpoint echoing the user:password@ of a URL, base64-encoded
_BEARER = re.compile(r"(?i)((?:bearer|basic)\s+)[A-Za-z0-9\-._~+/*]+=*")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>\]\[(){}]+")  # up to white space or a closing quote/bracket
_SECRET_QUERY = re.compile(r"(?i)^(api)?(key|token|secret|sig|signature|password|pass|pwd|auth|access|code)\w*$")
URL_SECRETS_ENV = "ACEMAD_URL_SECRETS"  # {URL as stored: URL with its credentials}, set by the reproduce driver


def remember_secret(key: str) -> None:
    _SECRETS.add(key)


def _secret_query(name: str) -> bool:
    return bool(_SECRET_QUERY.match(name.replace("-", "").replace("_", "")))


def remember_url_secrets(url: Optional[str]) -> None:
    """The password and credential query values of `url` are redacted from now on wherever they appear (not the user
    name: "user" or "admin" is no secret, and redacting it would garble every message that says the word)."""
    try:
        u = urlparse(url or "")
        parts = [u.password, *(v for k, v in parse_qsl(u.query) if _secret_query(k))]
    except ValueError:
        return
    _SECRETS.update(part for part in parts if part)


def _strip_one(url: str) -> str:
    try:
        u = urlparse(url)
        query = [(k, v) for k, v in parse_qsl(u.query, keep_blank_values=True) if not _secret_query(k)]
        return urlunparse(u._replace(netloc=u.netloc.rpartition("@")[2], query=urlencode(query)))
    except ValueError:  # not parseable as a URL (a bad port): keep scheme and host-ish part only
        return url.split("@")[-1].split("?")[0]


def strip_url_secrets(text: str) -> str:
    """`text` with every URL's user:password@ and credential query values removed."""
    return _URL.sub(lambda m: _strip_one(m.group()), str(text))


def hide_url(url: str) -> tuple[str, dict]:
    """(the URL to store and pass on, {that: url}) when `url` carries credentials, else (url, {})."""
    stored = strip_url_secrets(url)
    return stored, ({stored: url} if stored != url else {})


def restore_url(url: Optional[str]) -> Optional[str]:
    """The URL with the credentials hide_url took out (from URL_SECRETS_ENV), or `url` as it is."""
    try:
        full = json.loads(env(URL_SECRETS_ENV) or "{}").get(url) if url else None
    except (ValueError, AttributeError):
        return url
    if not isinstance(full, str):
        return url
    remember_url_secrets(full)
    return full


def redact(text: str) -> str:
    """`text` with the keys given, OPENAI_API_KEY, sk-... tokens and Bearer credentials as '***', no URL credentials."""
    text = strip_url_secrets(str(text)) if "://" in str(text) else str(text)
    key = os.environ.get("OPENAI_API_KEY")
    for secret in sorted(_SECRETS | ({key} if key else set()), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _KEYLIKE.sub(lambda m: (m.group(1) or m.group(2)) + "-***", text)
    return _BEARER.sub(lambda m: m.group(1) + "***", text)


def _redact_obj(obj: Any) -> Any:
    """A JSON-like value (an error body) with every string redacted."""
    try:
        return redact(obj) if isinstance(obj, str) else json.loads(redact(json.dumps(obj)))
    except (TypeError, ValueError, RecursionError):  # not JSON: an object whose str() the caller redacts
        return obj


def scrub(exc: BaseException) -> BaseException:
    """`exc` and its cause/context chain changed in place (type and status_code kept) to carry no key."""
    seen: set[int] = set()
    e: Optional[BaseException] = exc
    openai = sys.modules.get("openai")  # looked up, not imported: only a loaded SDK raises its errors
    while e is not None and id(e) not in seen and len(seen) < 10:
        seen.add(id(e))
        try:
            e.args = tuple(_redact_obj(a) for a in e.args)
            if openai is not None and isinstance(e, openai.APIError):
                e.message = redact(e.message)
                for field in ("body", "code", "param", "type"):  # the SDK copies these out of the error body
                    if hasattr(e, field):
                        setattr(e, field, _redact_obj(getattr(e, field)))
                if (req := getattr(e, "request", None)) is not None:
                    e.request = type(req)(req.method, safe_url(str(req.url)))
                if (resp := getattr(e, "response", None)) is not None:
                    try:
                        text = resp.text
                    except Exception:  # a body that was never read: nothing to show
                        text = ""
                    e.response = type(resp)(resp.status_code, content=redact(text).encode(), request=e.request,
                                            headers=[(k, redact(v)) for k, v in resp.headers.items()
                                                     if k.lower() != "set-cookie"])  # fmt: skip
        except Exception:  # an exotic exception type with read-only fields: its args were the best we could do
            pass
        e = e.__cause__ or e.__context__
    return exc


def preview(text: Any, n: int = 200) -> str:
    """The first n characters of what an endpoint sent, quoted and redacted, for an error message."""
    text = bytes(text).decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
    if not text.strip():
        return "an empty body" if not text else f"a body of {len(text)} blank characters"
    more = f"... ({len(text)} characters)" if len(text) > n else ""
    return redact(repr(redact(text)[:n])) + more  # redacted before the cut: a key across it would leave its tail


def safe_url(url: Optional[str]) -> str:
    """A base URL for messages: no user:password@, no query string."""
    return strip_url_secrets(url).split("?")[0] if url else "https://api.openai.com/v1 (the default)"
