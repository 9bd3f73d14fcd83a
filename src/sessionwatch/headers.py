"""How session keys and agent ids travel in HTTP headers (``X-Session-Key``, ``X-Agent-Id``).

HTTP header values are bytes that servers commonly read as Latin-1, so a key such as
``agent:main:équipe`` cannot be sent as it is. The one encoding both sides use: the key's UTF-8 bytes,
percent-encoded (``%C3%A9``). Printable ASCII other than ``%`` is sent as it is, so ordinary keys look
the same as before; a literal ``%`` is sent as ``%25``. A server decodes percent escapes, then requires
the bytes to be UTF-8 (raw UTF-8 bytes in the header are therefore understood too).
"""

from __future__ import annotations

from urllib.parse import quote, unquote_to_bytes

from .errors import InvalidArgument


def encode_header_value(value: str) -> str:
    """Percent-encode everything outside printable ASCII, and ``%`` itself, as UTF-8."""
    return "".join(c if "!" <= c <= "~" and c != "%" else quote(c, safe="", errors="surrogatepass") for c in value)


def decode_header_value(raw: str | bytes, name: str) -> str:
    """The inverse of :func:`encode_header_value`. ``raw`` as the server got it (``str`` values are
    taken as Latin-1, which is how ASGI servers hand header bytes over). Not UTF-8: ``InvalidArgument``."""
    data = raw.encode("latin-1") if isinstance(raw, str) else raw
    try:
        return unquote_to_bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgument(f"the {name} header is not percent-encoded UTF-8") from None
