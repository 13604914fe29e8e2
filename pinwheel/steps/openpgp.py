"""The fingerprint of an OpenPGP public key file (RFC 4880 v4, RFC 9580 v6), armored or binary: what an apt
source's signing key is pinned by. Only the primary key packet is read; nothing is verified beyond it."""
from __future__ import annotations

import base64
import hashlib

_ARMOR = b"-----BEGIN PGP PUBLIC KEY BLOCK-----"


class KeyFileError(ValueError):
    """Not an OpenPGP public key this reads."""


def _dearmor(data: bytes) -> bytes:
    lines = data.decode("ascii", "replace").splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == _ARMOR.decode())
    except StopIteration:
        raise KeyFileError("no armor header") from None
    body, in_headers = [], True
    for line in lines[start + 1:]:
        line = line.strip()
        if line.startswith("-----END"):
            break
        if in_headers:  # armor headers (Version: ...) end at the first empty line
            if not line:
                in_headers = False
            elif ":" not in line:
                in_headers = False
                body.append(line)
            continue
        if line.startswith("="):  # the CRC-24 checksum line
            break
        body.append(line)
    try:
        return base64.b64decode("".join(body), validate=True)
    except ValueError:
        raise KeyFileError("its armored body is not base64") from None


def _first_packet(data: bytes) -> tuple[int, bytes]:
    """(tag, body) of the first packet."""
    if not data or not data[0] & 0x80:
        raise KeyFileError("it does not start with an OpenPGP packet")
    b = data[0]
    if b & 0x40:  # new format
        tag, o = b & 0x3F, data[1:]
        if not o:
            raise KeyFileError("truncated")
        if o[0] < 192:
            length, head = o[0], 2
        elif o[0] < 224:
            length, head = ((o[0] - 192) << 8) + o[1] + 192, 3
        elif o[0] == 255:
            length, head = int.from_bytes(o[1:5], "big"), 6
        else:
            raise KeyFileError("a partial-length key packet")
    else:  # old format
        tag, kind = (b >> 2) & 0x0F, b & 0x03
        if kind == 3:
            raise KeyFileError("an indeterminate-length key packet")
        size = (1, 2, 4)[kind]
        length, head = int.from_bytes(data[1:1 + size], "big"), 1 + size
    body = data[head:head + length]
    if len(body) != length:
        raise KeyFileError("truncated")
    return tag, body


def fingerprint(data: bytes) -> str:
    """The primary key's fingerprint, upper-case hex (40 digits for v4, 64 for v6)."""
    if data.lstrip().startswith(_ARMOR):
        data = _dearmor(data.lstrip())
    tag, body = _first_packet(data)
    if tag != 6:
        raise KeyFileError(f"its first packet is not a public key (tag {tag})")
    version = body[0] if body else 0
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise KeyFileError(f"a version {version} key (this reads versions 4 and 6)")


def armored(data: bytes) -> bool:
    return data.lstrip().startswith(_ARMOR)
