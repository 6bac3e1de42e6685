"""Sizes, durations, prices and amounts as gpunet writes them (the rules of
internal/jobspec/units.go and the CLI's amounts), read exactly: "0.1" SYNC
is 100000 usync, never a float's approximation."""

from __future__ import annotations

import re
from fractions import Fraction

USYNC_PER_SYNC = 1_000_000
MAX_UINT64 = (1 << 64) - 1
NS = 1
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

KB, MB, GB, TB, PB = 1000, 1000 ** 2, 1000 ** 3, 1000 ** 4, 1000 ** 5
KiB, MiB, GiB, TiB, PiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40, 1 << 50

_BYTE_UNITS = {"": 1, "b": 1, "kb": KB, "mb": MB, "gb": GB, "tb": TB, "pb": PB,
               "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB, "pib": PiB,
               "ki": KiB, "mi": MiB, "gi": GiB, "ti": TiB, "pi": PiB}
_FORMAT_UNITS = [("PiB", PiB), ("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB),
                 ("PB", PB), ("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)]


def clip(s: str) -> str:
    """Shortens a value quoted in an error message to 80 bytes."""
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= 80:
        return s
    return b[:80].decode("utf-8", "ignore") + "…"


def goq(s: str) -> str:
    """s quoted as Go's %q quotes it (for the messages that mirror Go's)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _split_number(s: str) -> tuple[str, str]:
    i, digits, dot = 0, 0, False
    while i < len(s):
        c = s[i]
        if "0" <= c <= "9":
            digits += 1
        elif c == "." and not dot:
            dot = True
        else:
            break
        i += 1
    if digits == 0:
        return "", s
    return s[:i], s[i:]


def _decimal(s: str) -> Fraction:
    mant, exp = s, ""
    m = re.search(r"[eE]", s)
    if m:
        mant, exp = s[:m.start()], s[m.start() + 1:]
        e = exp.lstrip("+-") if exp[:1] in "+-" else exp
        if exp.startswith(("+", "-")):
            e = exp[1:]
        if not e or len(e) > 3 or not e.isdigit():
            raise ValueError(f"bad exponent in {goq(clip(s))}")
    num, rest = _split_number(mant)
    if not num or rest:
        raise ValueError(f"{goq(clip(s))} is not a decimal number")
    r = Fraction(num if not num.endswith(".") else num + "0") if not num.startswith(".") else Fraction("0" + num)
    if exp:
        r *= Fraction(10) ** int(exp)
    return r


def parse_bytes(s: str) -> int:
    """A size such as "256MiB", "1.5 GB" or "4096" in bytes."""
    t = s.strip()
    if t.startswith("-"):
        raise ValueError(f"size {goq(clip(s))} is negative")
    num, unit = _split_number(t)
    if not num:
        raise ValueError(f"{goq(clip(s))} is not a size: write a number with a unit, e.g. 256MiB or 2GiB")
    unit = unit.strip()
    size = _BYTE_UNITS.get(unit.lower())
    if size is None:
        if unit.lower() in ("k", "m", "g", "t", "p"):
            u = unit.upper()
            raise ValueError(f"unit {goq(clip(unit))} in {goq(clip(s))} is ambiguous: write {u}B (powers of 1000) or {u}iB (powers of 1024)")
        raise ValueError(f"unknown unit {goq(unit)} in {goq(clip(s))}: use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)")
    try:
        r = _decimal(num) * size
    except ValueError as e:
        raise ValueError(f"{goq(clip(s))} is not a size: {e}") from None
    if r.denominator != 1:
        raise ValueError(f"{goq(clip(s))} is not a whole number of bytes")
    if r > MAX_UINT64:
        raise ValueError(f"{goq(clip(s))} is too large")
    return int(r)


def format_bytes(b: int) -> str:
    """b exactly, in the unit that gives the smallest whole number."""
    best, best_n = "B", b
    for name, size in _FORMAT_UNITS:
        if b and b % size == 0 and b // size < best_n:
            best, best_n = name, b // size
    return f"{best_n}{best}"


_GO_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 1_000_000, "s": SECOND, "m": MINUTE, "h": HOUR}
_MAX_INT64 = (1 << 63) - 1


def _go_parse_duration(s: str) -> int:
    """Go's time.ParseDuration (without sign handling beyond Go's)."""
    orig, d, neg = s, 0, False
    if s and s[0] in "+-":
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f'time: invalid duration "{orig}"')
    while s:
        m = re.match(r"(\d*)(\.(\d*))?", s)
        whole, frac = m.group(1), m.group(3) or ""
        if not whole and not frac:
            raise ValueError(f'time: invalid duration "{orig}"')
        if m.group(2) is not None and not whole and not frac:
            raise ValueError(f'time: invalid duration "{orig}"')
        s = s[m.end():]
        u = re.match(r"[^\d.]*", s).group(0)
        if not u:
            raise ValueError(f'time: missing unit in duration "{orig}"')
        if u not in _GO_UNITS:
            raise ValueError(f'time: unknown unit "{u}" in duration "{orig}"')
        s = s[len(u):]
        unit = _GO_UNITS[u]
        v = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
        d += int(v * unit)
        if d > _MAX_INT64:
            raise ValueError(f'time: invalid duration "{orig}"')
    return -d if neg else d


def parse_duration(s: str) -> int:
    """A duration such as "10m", "1h30m" or "2d", in nanoseconds."""
    t = s.strip()
    not_duration = ValueError(f"{goq(clip(s))} is not a duration: write e.g. 90s, 10m, 1h30m or 2d")
    if not t:
        raise not_duration
    neg = False
    if t[0] in "+-":
        neg, t = t[0] == "-", t[1:]
    num, rest = _split_number(t)
    if num and not rest:
        msg = f"duration {goq(clip(s))} has no unit: write e.g. {num}s"
        if num.isdigit() and int(num) < 1 << 32 and int(num) >= 60 and int(num) % 60 == 0:
            msg += f" or {int(num) // 60}m"
        raise ValueError(msg)
    total = 0
    i = t.find("d")
    if i >= 0:
        try:
            days = _decimal(t[:i]) * DAY
        except ValueError:
            raise not_duration from None
        if days.denominator != 1 or days > _MAX_INT64:
            raise ValueError(f"duration {goq(clip(s))} is out of range")
        total, t = int(days), t[i + 1:]
    if t:
        if t[0] in "+-":
            raise not_duration
        try:
            rest_ns = _go_parse_duration(t)
        except ValueError as e:
            if "unknown unit" in str(e):
                raise ValueError(f"unknown unit in duration {goq(clip(s))}: use s, m, h or d (e.g. 90s, 10m, 1h30m, 2d)") from None
            raise not_duration from None
        if total > _MAX_INT64 - rest_ns:
            raise ValueError(f"duration {goq(clip(s))} is out of range")
        total += rest_ns
    return -total if neg else total


def _go_duration_string(d: int) -> str:
    """Go's time.Duration.String for 0 < d < 1 minute."""
    if d < SECOND:
        for unit, size in (("ms", 1_000_000), ("µs", 1000), ("ns", 1)):
            if d >= size or unit == "ns":
                return _trim_frac(d, size) + unit
    return _trim_frac(d, SECOND) + "s"


def _trim_frac(d: int, size: int) -> str:
    whole, frac = divmod(d, size)
    if not frac:
        return str(whole)
    digits = len(str(size)) - 1
    return f"{whole}." + f"{frac:0{digits}d}".rstrip("0")


def format_duration(d: int) -> str:
    """d (nanoseconds) as gpunet writes it: "7d", "36h", "1h30m", "1.5s"."""
    if d == 0:
        return "0s"
    out = "-" if d < 0 else ""
    u = abs(d)
    if u % DAY == 0:
        return out + f"{u // DAY}d"
    h, u = divmod(u, HOUR)
    if h:
        out += f"{h}h"
    m, u = divmod(u, MINUTE)
    if m:
        out += f"{m}m"
    if u:
        out += _go_duration_string(u)
    return out


def _usync_of(s: str, t: str, scale: int, what: str, not_a: str) -> int:
    t = t.strip()
    if t.startswith("-"):
        raise ValueError(f"{what} {goq(clip(s))} is negative")
    try:
        r = _decimal(t) * scale
    except ValueError:
        raise ValueError(f"{goq(clip(s))} is not {not_a}") from None
    if r.denominator != 1:
        raise ValueError(f"{what} {goq(clip(s))} is finer than 1 usync (0.000001 SYNC)")
    if r > MAX_UINT64:
        raise ValueError(f"{what} {goq(clip(s))} is too large")
    return int(r)


def parse_price(s: str) -> int:
    """A price per hour such as "0.5", "0.5 SYNC", "500000usync" or
    "1.2sync/h", in usync per hour. A bare number is SYNC."""
    t = s.strip().lower()
    for suffix in ("/hour", "/h"):
        if t.endswith(suffix):
            t = t[: -len(suffix)].strip()
            break
    scale = USYNC_PER_SYNC
    if t.endswith("usync"):
        t, scale = t[:-5], 1
    elif t.endswith("sync"):
        t = t[:-4]
    return _usync_of(s, t, scale, "price", "a price: write SYNC per hour, e.g. 0.5, 0.5sync or 500000usync")


def parse_spec_amount(s: str) -> int:
    """A spec's amount (budget) with its unit: "5 SYNC", "5000000usync"."""
    t = s.strip().lower()
    scale = USYNC_PER_SYNC
    if t.endswith("usync"):
        t, scale = t[:-5], 1
    elif t.endswith("sync"):
        t = t[:-4]
    elif t.endswith("/h") or t.endswith("/hour"):
        raise ValueError(f"{goq(clip(s))} is a price per hour; a budget is an amount in all, e.g. 5 SYNC")
    else:
        try:
            _decimal(t)
        except ValueError:
            pass
        else:
            raise ValueError(f"{goq(clip(s))} has no unit: write e.g. {t} SYNC or {t}usync")
    return _usync_of(s, t, scale, "amount", "an amount: write e.g. 5 SYNC, 0.5sync or 500000usync")


def parse_amount(v: int | str) -> int:
    """An amount as the CLI reads one, positive: a string with its unit
    ("2.5sync", "1500usync"), or an int in usync. A bare number in a string
    is refused, as the CLI refuses it: "5" could mean 5 SYNC (as max_price
    reads it) or 5 usync, a millionfold apart."""
    if isinstance(v, bool):
        raise ValueError(f"amount {v!r}: want usync (an int) or a string like 2.5sync")
    if isinstance(v, int):
        if v <= 0:
            raise ValueError(f"amount {v} must be positive")
        if v > MAX_UINT64:
            raise ValueError(f"amount {v} is too large")
        return v
    if not isinstance(v, str):
        raise ValueError(f"amount {v!r}: want usync (an int) or a string like 2.5sync")
    t = v.strip().lower()
    scale, unit = 1, True
    if t.endswith("usync"):
        t = t[:-5]
    elif t.endswith("sync"):
        t, scale = t[:-4], USYNC_PER_SYNC
    else:
        unit = False
    t = t.strip()
    if not t:
        raise ValueError(f"amount {goq(v)} has no number (write e.g. 2.5sync or 1500usync)")
    if t.startswith("-"):
        raise ValueError(f"amount {goq(v)} is negative")
    if re.search(r"[eE/]", t) or not re.fullmatch(r"\+?(\d+\.?\d*|\.\d+)", t):
        raise ValueError(f"amount {goq(v)} is not a number with its unit (write e.g. 2.5sync or 1500usync)")
    n = Fraction(t.lstrip("+") if not t.lstrip("+").startswith(".") else "0" + t.lstrip("+"))
    if n == 0:
        raise ValueError(f"amount {goq(v)} must be positive")
    if not unit:
        ex = f"write {t}sync for {t} SYNC"
        if n.denominator == 1:
            ex += f", or {t}usync for {format_sync(int(n))[:-5]} SYNC"
        raise ValueError(f"amount {goq(v)} has no unit: {ex}")
    r = n * scale
    if r.denominator != 1:
        raise ValueError(f"amount {goq(v)} is not a whole number of usync (1 sync = 1000000 usync)")
    if r > MAX_UINT64:
        raise ValueError(f"amount {goq(v)} is too large")
    return int(r)


def format_sync(u: int) -> str:
    """usync as SYNC: "2.5 SYNC"."""
    whole, frac = divmod(u, USYNC_PER_SYNC)
    s = str(whole)
    if frac:
        s += f".{frac:06d}".rstrip("0")
    return s + " SYNC"
