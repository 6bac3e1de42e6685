"""gpunet transactions, encoded byte for byte as the Go client encodes them
(internal/ledger/tx.go): a tx built and signed here is the same bytes as
one built and signed by ``gpunet`` from the same key and fields.

Wire format (integers unsigned minimal varints, byte strings length-prefixed)::

    version(1) chain_id sequence fee msg_type pubkey(32) msg_body signature(64)

``msg_body`` is the message as compact JSON, exactly as Go's encoding/json
writes it (fields in struct order, ``omitempty`` fields left out when
empty, map keys sorted, ``<``, ``>`` and ``&`` escaped); the signature is
ed25519 over ``"gpunet/tx/v1\\x00"`` followed by every byte before it.
Messages are plain Python values built by the ``msg_*`` functions below,
which keep the Go field order.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

from . import _bech32

TX_VERSION = 1
SIGN_DOMAIN = b"gpunet/tx/v1\x00"

# Message types (ledger.MsgType*): stable numbers.
MSG_SEND = 1
MSG_SUBMIT_JOB = 8
MSG_GRANT_KEY = 9
MSG_CANCEL_JOB = 12
MSG_DEPLOY_SERVICE = 50
MSG_TOP_UP_SERVICE = 51
MSG_SCALE_SERVICE = 52
MSG_STOP_SERVICE = 53
MSG_SET_SERVICE_ACCESS = 54

MSG_NAMES = {
    MSG_SEND: "send", MSG_SUBMIT_JOB: "submit_job", MSG_GRANT_KEY: "grant_key", MSG_CANCEL_JOB: "cancel_job",
    MSG_DEPLOY_SERVICE: "deploy_service", MSG_TOP_UP_SERVICE: "top_up_service",
    MSG_SCALE_SERVICE: "scale_service", MSG_STOP_SERVICE: "stop_service",
    MSG_SET_SERVICE_ACCESS: "set_service_access",
}

ADDRESS_HRP = "gpu"
MAX_UINT64 = (1 << 64) - 1


# ---------------------------------------------------------------------------
# Go's encoding/json, for the values messages hold.

_HEX = "0123456789abcdef"


def go_string(s: str) -> str:
    """s as a JSON string, escaped as Go's encoding/json escapes it."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or ch in "<>&":
            out.append("\\u00" + _HEX[o >> 4] + _HEX[o & 15])
        elif ch in "\u2028\u2029":
            out.append("\\u202" + _HEX[o & 15])
        elif 0xD800 <= o <= 0xDFFF:
            out.append("\\ufffd")  # not valid UTF-8: Go writes U+FFFD
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class Raw(bytes):
    """Bytes that encode as base64, as Go encodes a []byte."""


def go_json(v: Any) -> str:
    """v as compact JSON, the way Go's json.Marshal writes the same value:
    dicts keep their order (they stand for structs) unless they are Map."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Raw):
        return '"' + base64.b64encode(bytes(v)).decode() + '"'
    if isinstance(v, str):
        return go_string(v)
    if isinstance(v, Map):
        items = sorted(v.items(), key=lambda kv: kv[0].encode("utf-8", "surrogatepass"))
        return "{" + ",".join(go_string(k) + ":" + go_json(x) for k, x in items) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(go_string(k) + ":" + go_json(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(go_json(x) for x in v) + "]"
    if isinstance(v, float):
        raise TypeError("floats have no place in a message")
    raise TypeError(f"cannot encode {type(v).__name__} as a message field")


class Map(dict):
    """A Go map[string]string: keys sorted when encoded."""


def struct(*fields: tuple[str, Any, bool]) -> dict:
    """A Go struct's JSON: (name, value, omitempty) in field order."""
    out: dict[str, Any] = {}
    for name, value, omitempty in fields:
        if omitempty and _empty(value):
            continue
        out[name] = value
    return out


def _empty(v: Any) -> bool:
    """Go's omitempty: false, 0, "", nil, and empty slices and maps (a
    struct, here a plain dict, is never empty)."""
    if v is None or v is False:
        return True
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v == 0
    if isinstance(v, (str, bytes, list, tuple, Map)):
        return len(v) == 0
    return False


def _u64(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_UINT64:
        raise ValueError(f"{name}: want an integer in [0, 2^64-1], got {v!r}")
    return v


# ---------------------------------------------------------------------------
# Addresses.

def address_from_pubkey(pub: bytes) -> str:
    """The account address (gpu1…) of an ed25519 public key: bech32 of the
    first 20 bytes of its SHA-256."""
    if len(pub) != 32:
        raise ValueError(f"public key has {len(pub)} bytes, want 32")
    return _bech32.encode(ADDRESS_HRP, hashlib.sha256(pub).digest()[:20])


def parse_address(s: str) -> str:
    """Checks that s is a gpunet address and returns it in canonical (lower
    case) form; raises ValueError naming what is wrong."""
    if not isinstance(s, str) or not s:
        raise ValueError("invalid address: empty")
    try:
        hrp, data = _bech32.decode(s)
    except ValueError as e:
        raise ValueError(f"invalid address {s!r}: {e}") from None
    if hrp != ADDRESS_HRP:
        raise ValueError(f"invalid address {s!r}: prefix is {hrp!r}, want {ADDRESS_HRP!r}")
    if len(data) != 20:
        raise ValueError(f"invalid address {s!r}: holds {len(data)} bytes, want 20")
    return _bech32.encode(ADDRESS_HRP, data)


# ---------------------------------------------------------------------------
# Messages, in the Go structs' field order.

def msg_send(to: str, amount: int) -> tuple[int, dict]:
    to = parse_address(to)
    if _u64("amount", amount) == 0:
        raise ValueError("amount must be positive, got 0")
    return MSG_SEND, struct(("to", to, False), ("amount", amount, False))


def msg_cancel_job(job_id: int) -> tuple[int, dict]:
    return MSG_CANCEL_JOB, struct(("job_id", _u64("job_id", job_id), False))


def msg_grant_key(job_id: int, grants: Sequence[tuple[str, bytes]]) -> tuple[int, dict]:
    if not 1 <= len(grants) <= 8:
        raise ValueError(f"grants: want 1 to 8, got {len(grants)}")
    gs = [struct(("provider", parse_address(p), False), ("wrapped_key", Raw(k), False)) for p, k in grants]
    return MSG_GRANT_KEY, struct(("job_id", _u64("job_id", job_id), False), ("grants", gs, False))


def msg_submit_job(spec: dict, consumer_key: str, input_blob: str = "", key_commitment: bytes | None = None,
                   data_at: str = "") -> tuple[int, dict]:
    """spec is a ledger job spec as ledger_job_spec builds it."""
    kc = key_commitment.hex() if key_commitment is not None else None
    return MSG_SUBMIT_JOB, struct(("spec", spec, False), ("input_blob", input_blob, True),
                                  ("consumer_key", consumer_key, False), ("key_commitment", kc, True),
                                  ("data_at", data_at, True))


def msg_deploy_service(spec: dict, budget: int, consumer_key: str, public: bool,
                       key_hashes: Sequence[bytes] = ()) -> tuple[int, dict]:
    return MSG_DEPLOY_SERVICE, struct(("spec", spec, False), ("budget", _u64("budget", budget), False),
                                      ("consumer_key", consumer_key, False), ("public", bool(public), True),
                                      ("key_hashes", [h.hex() for h in key_hashes], True))


def msg_stop_service(service_id: int) -> tuple[int, dict]:
    return MSG_STOP_SERVICE, struct(("service_id", _u64("service_id", service_id), False))


def msg_scale_service(service_id: int, replicas: int) -> tuple[int, dict]:
    return MSG_SCALE_SERVICE, struct(("service_id", _u64("service_id", service_id), False),
                                     ("replicas", _u64("replicas", replicas), False))


def msg_top_up_service(service_id: int, amount: int) -> tuple[int, dict]:
    return MSG_TOP_UP_SERVICE, struct(("service_id", _u64("service_id", service_id), False),
                                      ("amount", _u64("amount", amount), False))


def msg_set_service_access(service_id: int, public: bool, key_hashes: Sequence[bytes] = ()) -> tuple[int, dict]:
    return MSG_SET_SERVICE_ACCESS, struct(("service_id", _u64("service_id", service_id), False),
                                          ("public", bool(public), False),
                                          ("key_hashes", [h.hex() for h in key_hashes], True))


# ---------------------------------------------------------------------------
# The envelope.

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@dataclass
class Tx:
    """A transaction: msg is (type, body) as the msg_* functions return."""

    chain_id: str
    sequence: int
    fee: int
    msg: tuple[int, Any]
    pubkey: bytes = b""
    signature: bytes = b""

    def body(self) -> bytes:
        return go_json(self.msg[1]).encode("utf-8", "surrogatepass")

    def _unsigned(self) -> bytes:
        if len(self.pubkey) != 32:
            raise ValueError(f"public key has {len(self.pubkey)} bytes, want 32")
        cid = self.chain_id.encode()
        if len(cid) > 64:
            raise ValueError(f"chain id is {len(cid)} bytes, at most 64")
        body = self.body()
        return (bytes([TX_VERSION]) + _uvarint(len(cid)) + cid + _uvarint(_u64("sequence", self.sequence)) +
                _uvarint(_u64("fee", self.fee)) + _uvarint(_u64("msg_type", self.msg[0])) + self.pubkey +
                _uvarint(len(body)) + body)

    def sign_bytes(self) -> bytes:
        """What the signature covers."""
        return SIGN_DOMAIN + self._unsigned()

    def sign(self, priv: Ed25519PrivateKey) -> "Tx":
        self.pubkey = priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.signature = priv.sign(self.sign_bytes())
        return self

    def encode(self) -> bytes:
        """The wire form of the signed tx."""
        if len(self.signature) != 64:
            raise ValueError("tx is not signed")
        return self._unsigned() + self.signature

    def hash(self) -> str:
        """The tx hash (hex SHA-256 of the wire form, upper case as CometBFT)."""
        return hashlib.sha256(self.encode()).hexdigest().upper()


def job_key_commitment(job_key: str) -> bytes:
    """ledger.JobKeyCommitment of a job key's string form."""
    return hashlib.sha256(b"gpunet/job-key/v1\x00" + job_key.encode()).digest()


def service_key_hash(key: str) -> bytes:
    """What the chain keeps of a service access key: its SHA-256."""
    return hashlib.sha256(key.encode()).digest()
