"""Bech32 (BIP 173) as gpunet addresses and age keys use it, without the
90-character limit (age keys are longer)."""

from __future__ import annotations

CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_REV = {c: i for i, c in enumerate(CHARSET)}
_GEN = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _polymod(values) -> int:
    chk = 1
    for v in values:
        b = chk >> 25
        chk = ((chk & 0x1FFFFFF) << 5) ^ v
        for i in range(5):
            if (b >> i) & 1:
                chk ^= _GEN[i]
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _convert(data: bytes | list[int], frombits: int, tobits: int, pad: bool) -> list[int]:
    acc, bits, out = 0, 0, []
    maxv = (1 << tobits) - 1
    for v in data:
        if v < 0 or v >> frombits:
            raise ValueError("invalid data value")
        acc = (acc << frombits) | v
        bits += frombits
        while bits >= tobits:
            bits -= tobits
            out.append((acc >> bits) & maxv)
    if pad:
        if bits:
            out.append((acc << (tobits - bits)) & maxv)
    elif bits >= frombits:
        raise ValueError("illegal zero padding")
    elif (acc << (tobits - bits)) & maxv:
        raise ValueError("non-zero padding")
    return out


def encode(hrp: str, data: bytes) -> str:
    """Encodes data under hrp, in lower case."""
    hrp = hrp.lower()
    d = _convert(data, 8, 5, True)
    pm = _polymod(_hrp_expand(hrp) + d + [0] * 6) ^ 1
    chk = [(pm >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(CHARSET[x] for x in d + chk)


def decode(s: str) -> tuple[str, bytes]:
    """Returns the hrp (as written, in lower case) and the data of s. It
    accepts all lower or all upper case, as age's bech32 does."""
    if s.lower() != s and s.upper() != s:
        raise ValueError("mixed case")
    pos = s.rfind("1")
    if pos < 1 or pos + 7 > len(s):
        raise ValueError("separator '1' at invalid position")
    hrp = s[:pos]
    for c in hrp:
        if ord(c) < 33 or ord(c) > 126:
            raise ValueError("invalid character in human-readable part")
    low = s.lower()
    data = []
    for c in low[pos + 1:]:
        if c not in _REV:
            raise ValueError(f"invalid character data part: {c!r}")
        data.append(_REV[c])
    if _polymod(_hrp_expand(hrp.lower()) + data) != 1:
        raise ValueError("invalid checksum")
    return hrp.lower(), bytes(_convert(data[:-6], 5, 8, False))
