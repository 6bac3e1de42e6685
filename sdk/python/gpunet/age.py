"""The age file format (C2SP age, v1), compatible with filippo.io/age, on
top of the primitives of the ``cryptography`` package.

What gpunet needs of it: X25519 recipients and identities (job data, logs,
outputs and job keys are sealed to them), scrypt passphrases (encrypted key
files), the ASCII armor, and the STREAM payload in 64 KiB chunks.

    >>> ident = X25519Identity.generate()
    >>> blob = encrypt(b"hello", [ident.recipient()])
    >>> decrypt(blob, [ident])
    b'hello'
"""

from __future__ import annotations

import base64
import hmac
import io
import os
import re
from dataclasses import dataclass, field
from hashlib import sha256
from typing import BinaryIO, Iterable, Iterator, Sequence

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from cryptography.hazmat.primitives import serialization
from cryptography.exceptions import InvalidTag

from . import _bech32

INTRO = b"age-encryption.org/v1\n"
X25519_LABEL = b"age-encryption.org/v1/X25519"
SCRYPT_LABEL = b"age-encryption.org/v1/scrypt"
CHUNK_SIZE = 64 * 1024
_TAG = 16
_ENC_CHUNK = CHUNK_SIZE + _TAG
_FILE_KEY_SIZE = 16
_MAX_HEADER = 2 << 20
ARMOR_HEADER = "-----BEGIN AGE ENCRYPTED FILE-----"
ARMOR_FOOTER = "-----END AGE ENCRYPTED FILE-----"


class AgeError(Exception):
    """A malformed, tampered or undecryptable age file."""


class NoIdentityMatch(AgeError):
    """None of the identities offered opens the file (it was not encrypted
    to them, or the passphrase is wrong)."""


def _b64enc(b: bytes) -> str:
    return base64.b64encode(b).decode().rstrip("=")


def _b64dec(s: str) -> bytes:
    if "\n" in s or "\r" in s or "=" in s:
        raise AgeError(f"invalid base64 {s!r}")
    pad = "=" * (-len(s) % 4)
    try:
        b = base64.b64decode(s + pad, validate=True)
    except Exception as e:  # binascii.Error
        raise AgeError(f"invalid base64 {s!r}: {e}") from None
    # Strict: the encoding must be canonical (no stray bits).
    if _b64enc(b) != s:
        raise AgeError(f"non-canonical base64 {s!r}")
    return b


def _hkdf(ikm: bytes, salt: bytes | None, info: bytes, n: int = 32) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=n, salt=salt, info=info).derive(ikm)


def _aead_encrypt(key: bytes, plaintext: bytes) -> bytes:
    return ChaCha20Poly1305(key).encrypt(b"\x00" * 12, plaintext, None)


def _aead_decrypt(key: bytes, size: int, ciphertext: bytes) -> bytes | None:
    if len(ciphertext) != size + _TAG:
        raise AgeError("encrypted value has unexpected length")
    try:
        return ChaCha20Poly1305(key).decrypt(b"\x00" * 12, ciphertext, None)
    except InvalidTag:
        return None


@dataclass
class Stanza:
    type: str
    args: list[str]
    body: bytes

    def marshal(self) -> bytes:
        out = io.BytesIO()
        out.write(("-> " + " ".join([self.type, *self.args]) + "\n").encode())
        enc = _b64enc(self.body)
        for i in range(0, len(enc), 64):
            out.write(enc[i:i + 64].encode() + b"\n")
        if len(enc) % 64 == 0:
            out.write(b"\n")  # a stanza ends with a short (maybe empty) line
        return out.getvalue()


def _x25519_pub(scalar: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(scalar).public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class X25519Recipient:
    """An age X25519 public key, written ``age1…``."""

    def __init__(self, public_key: bytes):
        if len(public_key) != 32:
            raise ValueError("invalid X25519 public key")
        self.public_key = bytes(public_key)

    @classmethod
    def parse(cls, s: str) -> "X25519Recipient":
        if not isinstance(s, str) or not s:
            raise ValueError('empty recipient; want an age X25519 public key ("age1…")')
        if s.upper().startswith("AGE-SECRET-KEY-"):
            raise ValueError('got a secret key (AGE-SECRET-KEY-…) where a recipient public key ("age1…") belongs')
        try:
            hrp, key = _bech32.decode(s)
        except ValueError as e:
            raise ValueError(f"malformed recipient {s!r}: {e}") from None
        if hrp != "age":
            raise ValueError(f"malformed recipient {s!r}: invalid type {hrp!r}")
        if len(key) != 32:
            raise ValueError(f"malformed recipient {s!r}: invalid X25519 public key")
        return cls(key)

    def __str__(self) -> str:
        return _bech32.encode("age", self.public_key)

    def __repr__(self) -> str:
        return f"X25519Recipient({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, X25519Recipient) and other.public_key == self.public_key

    def __hash__(self) -> int:
        return hash(self.public_key)

    def wrap(self, file_key: bytes) -> list[Stanza]:
        eph = os.urandom(32)
        eph_priv = X25519PrivateKey.from_private_bytes(eph)
        ours = _x25519_pub(eph)
        shared = eph_priv.exchange(X25519PublicKey.from_public_bytes(self.public_key))
        if shared == b"\x00" * 32:
            raise AgeError("invalid X25519 recipient (low-order point)")
        key = _hkdf(shared, ours + self.public_key, X25519_LABEL)
        return [Stanza("X25519", [_b64enc(ours)], _aead_encrypt(key, file_key))]


class X25519Identity:
    """An age X25519 secret key, written ``AGE-SECRET-KEY-1…``."""

    def __init__(self, secret: bytes):
        if len(secret) != 32:
            raise ValueError("invalid X25519 secret key")
        self._secret = bytes(secret)
        self._public = _x25519_pub(self._secret)

    @classmethod
    def generate(cls) -> "X25519Identity":
        return cls(os.urandom(32))

    @classmethod
    def parse(cls, s: str) -> "X25519Identity":
        try:
            hrp, key = _bech32.decode(s.strip())
        except (ValueError, AttributeError) as e:
            raise ValueError(f"malformed secret key: {e}") from None
        if hrp != "age-secret-key-":
            raise ValueError(f"malformed secret key: unknown type {hrp.upper()!r}")
        if len(key) != 32:
            raise ValueError("malformed secret key: invalid X25519 secret key")
        return cls(key)

    def __str__(self) -> str:
        return _bech32.encode("AGE-SECRET-KEY-", self._secret).upper()

    def __repr__(self) -> str:
        return f"X25519Identity(recipient={str(self.recipient())!r})"

    def recipient(self) -> X25519Recipient:
        return X25519Recipient(self._public)

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        for s in stanzas:
            if s.type != "X25519":
                continue
            if len(s.args) != 1:
                raise AgeError("invalid X25519 recipient block")
            share = _b64dec(s.args[0])
            if len(share) != 32:
                raise AgeError("invalid X25519 recipient block")
            shared = X25519PrivateKey.from_private_bytes(self._secret).exchange(
                X25519PublicKey.from_public_bytes(share))
            if shared == b"\x00" * 32:
                raise AgeError("invalid X25519 recipient: low-order point")
            key = _hkdf(shared, share + self._public, X25519_LABEL)
            fk = _aead_decrypt(key, _FILE_KEY_SIZE, s.body)
            if fk is not None:
                return fk
        return None


_DIGITS = re.compile(r"^[1-9][0-9]*$")


class ScryptRecipient:
    """A passphrase, for encrypting (``work_factor`` is log2 of scrypt's N;
    age's default is 18)."""

    def __init__(self, passphrase: str | bytes, work_factor: int = 18):
        p = passphrase.encode() if isinstance(passphrase, str) else bytes(passphrase)
        if not p:
            raise ValueError("passphrase can't be empty")
        if not 1 <= work_factor <= 30:
            raise ValueError("work factor must be 1 to 30")
        self.passphrase, self.work_factor = p, work_factor

    def wrap(self, file_key: bytes) -> list[Stanza]:
        salt = os.urandom(16)
        k = Scrypt(salt=SCRYPT_LABEL + salt, length=32, n=1 << self.work_factor, r=8, p=1).derive(self.passphrase)
        return [Stanza("scrypt", [_b64enc(salt), str(self.work_factor)], _aead_encrypt(k, file_key))]


class ScryptIdentity:
    """A passphrase, for decrypting; refuses work factors above
    ``max_work_factor`` (age's default, 22)."""

    def __init__(self, passphrase: str | bytes, max_work_factor: int = 22):
        p = passphrase.encode() if isinstance(passphrase, str) else bytes(passphrase)
        if not p:
            raise ValueError("passphrase can't be empty")
        self.passphrase, self.max_work_factor = p, max_work_factor

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        if any(s.type == "scrypt" for s in stanzas) and len(stanzas) != 1:
            raise AgeError("an scrypt recipient must be the only one")
        for s in stanzas:
            if s.type != "scrypt":
                continue
            if len(s.args) != 2:
                raise AgeError("invalid scrypt recipient block")
            salt = _b64dec(s.args[0])
            if len(salt) != 16:
                raise AgeError("invalid scrypt recipient block")
            if not _DIGITS.match(s.args[1]):
                raise AgeError(f"scrypt work factor encoding invalid: {s.args[1]!r}")
            log_n = int(s.args[1])
            if log_n > self.max_work_factor:
                raise AgeError(f"scrypt work factor too large: {log_n}")
            k = Scrypt(salt=SCRYPT_LABEL + salt, length=32, n=1 << log_n, r=8, p=1).derive(self.passphrase)
            fk = _aead_decrypt(k, _FILE_KEY_SIZE, s.body)
            if fk is None:
                raise NoIdentityMatch("incorrect passphrase")
            return fk
        return None


def _header_mac(file_key: bytes, header_without_mac: bytes) -> bytes:
    return hmac.new(_hkdf(file_key, None, b"header"), header_without_mac, sha256).digest()


class _Reader:
    """Reads bytes from a file object or a bytes value."""

    def __init__(self, src: BinaryIO | bytes):
        self._f = io.BytesIO(src) if isinstance(src, (bytes, bytearray, memoryview)) else src
        self._buf = b""

    def readline(self, limit: int) -> bytes:
        while b"\n" not in self._buf:
            more = self._f.read(4096)
            if not more:
                break
            self._buf += more
            if len(self._buf) > limit:
                raise AgeError("header exceeds 2 MiB")
        i = self._buf.find(b"\n")
        if i < 0:
            line, self._buf = self._buf, b""
        else:
            line, self._buf = self._buf[: i + 1], self._buf[i + 1:]
        return line

    def peek(self, n: int) -> bytes:
        while len(self._buf) < n:
            more = self._f.read(4096)
            if not more:
                break
            self._buf += more
        return self._buf[:n]

    def read(self, n: int) -> bytes:
        out = self._buf[:n]
        self._buf = self._buf[n:]
        while len(out) < n:
            more = self._f.read(n - len(out))
            if not more:
                break
            out += more
        return out


def _parse_header(r: _Reader) -> tuple[list[Stanza], bytes, bytes]:
    """Returns the stanzas, the MAC and the header's bytes up to "---"."""
    raw = io.BytesIO()
    line = r.readline(_MAX_HEADER)
    if line != INTRO:
        if not line:
            raise AgeError("parsing age header: file is empty")
        if line.startswith(b"-----BEGIN"):
            raise AgeError("parsing age header: the file is armored; unarmor it first")
        raise AgeError(f"parsing age header: unexpected intro, expected {INTRO.decode()!r}")
    raw.write(line)
    stanzas: list[Stanza] = []
    while True:
        if raw.tell() > _MAX_HEADER:
            raise AgeError("parsing age header: header exceeds 2 MiB")
        if r.peek(3) == b"---":
            line = r.readline(_MAX_HEADER)
            if not line.endswith(b"\n"):
                raise AgeError("parsing age header: unexpected end of header")
            parts = line[:-1].split(b" ")
            if parts[0] != b"---" or len(parts) != 2:
                raise AgeError(f"parsing age header: malformed closing line: {line!r}")
            mac = _b64dec(parts[1].decode("ascii", "replace"))
            if len(mac) != 32:
                raise AgeError(f"parsing age header: malformed closing line {line!r}")
            raw.write(b"---")
            return stanzas, mac, raw.getvalue()
        if len(stanzas) >= 1024:
            raise AgeError("parsing age header: more than 1024 recipient stanzas")
        line = r.readline(_MAX_HEADER)
        if not line.endswith(b"\n"):
            raise AgeError("parsing age header: unexpected end of header")
        raw.write(line)
        parts = line[:-1].decode("ascii", "replace").split(" ")
        if parts[0] != "->" or len(parts) < 2 or any(not p for p in parts):
            raise AgeError(f"parsing age header: malformed stanza: {line!r}")
        body = b""
        while True:
            bl = r.readline(_MAX_HEADER)
            if not bl.endswith(b"\n"):
                raise AgeError("parsing age header: unexpected end of header")
            raw.write(bl)
            try:
                b = _b64dec(bl[:-1].decode("ascii"))
            except (AgeError, UnicodeDecodeError):
                raise AgeError(f"parsing age header: malformed body line {bl!r}") from None
            if len(b) > 48:
                raise AgeError(f"parsing age header: malformed body line {bl!r}: too long")
            body += b
            if len(b) < 48:
                break
        stanzas.append(Stanza(parts[1], parts[2:], body))


def _file_key(r: _Reader, identities: Sequence[object]) -> bytes:
    if not identities:
        raise ValueError("no identities")
    stanzas, mac, raw = _parse_header(r)
    file_key = None
    for ident in identities:
        file_key = ident.unwrap(stanzas)  # type: ignore[attr-defined]
        if file_key is not None:
            break
    if file_key is None:
        raise NoIdentityMatch("no identity matched any of the recipients (stanza types: " +
                              ", ".join(s.type for s in stanzas) + ")")
    if not hmac.compare_digest(_header_mac(file_key, raw), mac):
        raise AgeError("bad header MAC")
    return file_key


def _nonce(counter: int, last: bool) -> bytes:
    return counter.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


def decrypt_stream(src: BinaryIO | bytes, identities: Sequence[object]) -> Iterator[bytes]:
    """Yields the plaintext of src chunk by chunk (each authenticated
    before it is yielded). The header is read and checked when the first
    chunk is asked for; a truncated or altered file raises AgeError, at the
    latest at its end, so a caller must exhaust the iterator before
    trusting what it got."""
    r = _Reader(src)
    file_key = _file_key(r, identities)
    nonce = r.read(16)
    if len(nonce) != 16:
        raise AgeError("failed to read nonce")
    aead = ChaCha20Poly1305(_hkdf(file_key, nonce, b"payload"))
    counter = 0
    while True:
        chunk = r.read(_ENC_CHUNK)
        last = len(chunk) < _ENC_CHUNK
        if not chunk:
            raise AgeError("unexpected end of encrypted file")
        if last and counter > 0 and len(chunk) == _TAG:
            raise AgeError("last chunk is empty")
        try:
            plain = aead.decrypt(_nonce(counter, last), chunk, None)
        except InvalidTag:
            plain = None
            if not last:
                try:
                    plain = aead.decrypt(_nonce(counter, True), chunk, None)
                    last = True
                except InvalidTag:
                    pass
            if plain is None:
                raise AgeError("failed to decrypt and authenticate payload chunk, file may be corrupted or tampered with") from None
        counter += 1
        if last:
            if r.read(1):
                raise AgeError("trailing data after end of encrypted file")
            if plain:
                yield plain
            return
        yield plain


def decrypt(src: BinaryIO | bytes, identities: Sequence[object]) -> bytes:
    """Decrypts a whole age file held in memory or read from src."""
    return b"".join(decrypt_stream(src, identities))


class EncryptWriter:
    """Encrypts what is written to it to recipients, writing the age file
    to dst as it goes; close() writes the last chunk (dst is not closed)."""

    def __init__(self, dst: BinaryIO, recipients: Sequence[object]):
        if not recipients:
            raise ValueError("no recipients")
        file_key = os.urandom(_FILE_KEY_SIZE)
        stanzas: list[Stanza] = []
        for rc in recipients:
            stanzas.extend(rc.wrap(file_key))  # type: ignore[attr-defined]
        if any(s.type == "scrypt" for s in stanzas) and len(stanzas) != 1:
            raise ValueError("an scrypt recipient must be the only one")
        hdr = INTRO + b"".join(s.marshal() for s in stanzas) + b"---"
        dst.write(hdr + b" " + _b64enc(_header_mac(file_key, hdr)).encode() + b"\n")
        nonce = os.urandom(16)
        dst.write(nonce)
        self._dst = dst
        self._aead = ChaCha20Poly1305(_hkdf(file_key, nonce, b"payload"))
        self._buf = bytearray()
        self._counter = 0
        self._closed = False

    def write(self, data: bytes) -> int:
        if self._closed:
            raise ValueError("write to a closed EncryptWriter")
        self._buf += data
        # A full chunk is flushed only once more data follows it.
        while len(self._buf) > CHUNK_SIZE:
            self._flush(bytes(self._buf[:CHUNK_SIZE]), False)
            del self._buf[:CHUNK_SIZE]
        return len(data)

    def _flush(self, chunk: bytes, last: bool) -> None:
        self._dst.write(self._aead.encrypt(_nonce(self._counter, last), chunk, None))
        self._counter += 1

    def close(self) -> None:
        if self._closed:
            return
        self._flush(bytes(self._buf), True)
        self._buf.clear()
        self._closed = True

    def __enter__(self) -> "EncryptWriter":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()


def encrypt(plaintext: bytes, recipients: Sequence[object]) -> bytes:
    """Encrypts plaintext to recipients and returns the age file."""
    out = io.BytesIO()
    w = EncryptWriter(out, recipients)
    w.write(plaintext)
    w.close()
    return out.getvalue()


def armor(data: bytes) -> str:
    """The PEM-like armored form of an age file."""
    enc = base64.b64encode(data).decode()
    lines = [enc[i:i + 64] for i in range(0, len(enc), 64)]
    return ARMOR_HEADER + "\n" + "".join(l + "\n" for l in lines) + ARMOR_FOOTER + "\n"


def unarmor(text: str | bytes) -> bytes:
    """The age file inside an armored one."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    lines = text.strip().replace("\r\n", "\n").split("\n")
    if len(lines) < 2 or lines[0].strip() != ARMOR_HEADER or lines[-1].strip() != ARMOR_FOOTER:
        raise AgeError("armored age file: want -----BEGIN AGE ENCRYPTED FILE----- … -----END AGE ENCRYPTED FILE-----")
    body = lines[1:-1]
    for i, l in enumerate(body):
        if len(l) > 64 or (i < len(body) - 1 and len(l) != 64):
            raise AgeError("armored age file: malformed line length")
    try:
        return base64.b64decode("".join(body), validate=True)
    except Exception as e:
        raise AgeError(f"armored age file: invalid base64: {e}") from None
