"""The gpunet keyring: the same directory (HOME/keyring) and key files as
the Go CLI (internal/keys), read with the same rules.

A key file is JSON holding the key's name, address and public halves; its
private half (the ed25519 seed and the age X25519 identity) is either in
the clear (the devnet's test keys) or in ``encrypted_secret``, an armored
age file encrypted with a passphrase (scrypt). The passphrase comes, first
that applies, from: the ``passphrase`` argument, the first line of
``passphrase_file`` (the CLI's --keyring-passphrase-file), or
``$GPUNET_KEYRING_PASSPHRASE``. There is no prompt: a program asks its
user itself and passes ``passphrase``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from dataclasses import dataclass, field
from typing import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

from . import age
from .errors import KeyNotFound, KeyringError, NoPassphrase, UsageError, WrongPassphrase
from .tx import address_from_pubkey, parse_address

PASSPHRASE_ENV = "GPUNET_KEYRING_PASSPHRASE"
MAX_NAME_LEN = 64
_MAX_FILE = 64 << 10
_MAX_PASS_FILE = 4 << 10
_NAME_RULE = "names are 1-64 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit"
_FIELDS = {"name", "type", "address", "public_key", "private_key_seed", "x25519_identity",
           "x25519_recipient", "encrypted_secret"}


def validate_name(name: str) -> None:
    """Raises UsageError unless name may name a key (the CLI's rule)."""
    if not isinstance(name, str):
        raise UsageError(f"invalid key name {name!r}: want a string")
    if name == "":
        raise UsageError(f'invalid key name "": empty ({_NAME_RULE})')
    if len(name) > MAX_NAME_LEN:
        raise UsageError(f"invalid key name {name!r}: {len(name)} characters, at most {MAX_NAME_LEN} ({_NAME_RULE})")
    for i, c in enumerate(name):
        if ("a" <= c <= "z") or ("0" <= c <= "9") or (i > 0 and c in "._-"):
            continue
        raise UsageError(f"invalid key name {name!r}: character {c!r} at position {i} is not allowed ({_NAME_RULE})")


def _b64strict(s: str, what: str) -> bytes:
    try:
        b = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError, TypeError) as e:
        raise KeyringError(f'field "{what}" is not valid base64: {e}') from None
    if base64.b64encode(b).decode() != s:
        raise KeyringError(f'field "{what}" is not valid base64: not canonical')
    return b


@dataclass
class Key:
    """A key of the keyring. A locked key (encrypted, not yet opened) has
    its public halves only."""

    name: str
    address: str
    public_key: bytes
    recipient: str  # "age1…": what outputs and logs are sealed to
    encrypted: bool
    _priv: Ed25519PrivateKey | None = field(default=None, repr=False)
    _identity: age.X25519Identity | None = field(default=None, repr=False)

    @property
    def locked(self) -> bool:
        return self._priv is None

    def private_key(self) -> Ed25519PrivateKey:
        if self._priv is None:
            raise KeyringError(f"key {self.name!r} is encrypted and was only looked up; open it with Keyring.get")
        return self._priv

    def identity(self) -> age.X25519Identity:
        if self._identity is None:
            raise KeyringError(f"key {self.name!r} is encrypted and was only looked up; open it with Keyring.get")
        return self._identity

    def sign(self, msg: bytes) -> bytes:
        return self.private_key().sign(msg)


def _secret(seed_b64: str, identity: str) -> tuple[Ed25519PrivateKey, age.X25519Identity]:
    seed = _b64strict(seed_b64, "private_key_seed")
    if len(seed) != 32:
        raise KeyringError(f'field "private_key_seed" holds {len(seed)} bytes, want 32')
    try:
        ident = age.X25519Identity.parse(identity)
    except ValueError as e:
        raise KeyringError(f'field "x25519_identity": {e}') from None
    return Ed25519PrivateKey.from_private_bytes(seed), ident


def _pub(priv: Ed25519PrivateKey) -> bytes:
    return priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def decode_key_file(data: bytes) -> Key:
    """Parses and validates a key file's contents (as the Go keyring does)."""
    try:
        kf = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise KeyringError(f"malformed JSON: {e}") from None
    if not isinstance(kf, dict):
        raise KeyringError("malformed JSON: not an object")
    unknown = set(kf) - _FIELDS
    if unknown:
        raise KeyringError(f"malformed JSON: unknown field {sorted(unknown)[0]!r}")
    for k, v in kf.items():
        if not isinstance(v, str):
            raise KeyringError(f'malformed JSON: field "{k}" is not a string')
    g = lambda k: kf.get(k, "")
    name = g("name")
    try:
        validate_name(name)
    except UsageError as e:
        raise KeyringError(f'field "name": {e}') from None
    if g("type") != "ed25519":
        raise KeyringError(f'field "type" is {g("type")!r}, want "ed25519"')
    stored_pub = _b64strict(g("public_key"), "public_key")
    try:
        addr = parse_address(g("address"))
    except ValueError as e:
        raise KeyringError(f'field "address": {e}') from None
    if g("encrypted_secret"):
        if g("private_key_seed") or g("x25519_identity"):
            raise KeyringError('both "encrypted_secret" and cleartext private fields are set')
        if len(stored_pub) != 32:
            raise KeyringError(f'field "public_key" holds {len(stored_pub)} bytes, want 32')
        want = address_from_pubkey(stored_pub)
        if addr != want:
            raise KeyringError(f'field "address" is {addr}, but the public key gives {want} (the file was altered or corrupted)')
        try:
            age.X25519Recipient.parse(g("x25519_recipient"))
        except ValueError as e:
            raise KeyringError(f'field "x25519_recipient": {e}') from None
        k = Key(name, addr, stored_pub, g("x25519_recipient"), True)
        k._sealed = g("encrypted_secret")  # type: ignore[attr-defined]
        return k
    if g("x25519_recipient"):
        raise KeyringError('field "x25519_recipient" is set without "encrypted_secret"')
    priv, ident = _secret(g("private_key_seed"), g("x25519_identity"))
    pub = _pub(priv)
    if stored_pub != pub:
        raise KeyringError('field "public_key" does not match the private key seed (the file was altered or corrupted)')
    want = address_from_pubkey(pub)
    if addr != want:
        raise KeyringError(f'field "address" is {addr}, but the private key seed gives {want} (the file was altered or corrupted)')
    return Key(name, addr, pub, str(ident.recipient()), False, priv, ident)


def read_passphrase_file(path: str) -> bytes:
    """The passphrase in a file: its first line, without the line ending."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_PASS_FILE + 1)
    except OSError as e:
        raise KeyringError(f"passphrase_file: {e}") from None
    if len(data) > _MAX_PASS_FILE:
        raise KeyringError(f"passphrase_file: {path} is larger than {_MAX_PASS_FILE} bytes; it should hold one line, the passphrase")
    p = data.split(b"\n", 1)[0]
    if p.endswith(b"\r"):
        p = p[:-1]
    if not p:
        raise KeyringError(f"passphrase_file {path} is empty")
    return p


class Keyring:
    """The keyring in ``home``/keyring (home: $GPUNET_HOME, else ~/.gpunet).

    ``passphrase`` (str, bytes, or a function of the key's name returning
    one) decrypts encrypted keys; without it ``passphrase_file``, then
    $GPUNET_KEYRING_PASSPHRASE. The passphrase is read once per keyring."""

    def __init__(self, home: str | None = None, passphrase: str | bytes | Callable[[str], str | bytes] | None = None,
                 passphrase_file: str | None = None):
        self.home = default_home() if home is None else os.path.expanduser(os.fspath(home))
        if not self.home:
            raise UsageError("home must not be empty")
        self.dir = os.path.join(self.home, "keyring")
        self._pass = passphrase
        self._pass_file = passphrase_file
        self._cached: bytes | None = None

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name + ".json")

    def lookup(self, name: str) -> Key:
        """The key's public halves, never asking for a passphrase."""
        validate_name(name)
        path = self._path(name)
        try:
            with open(path, "rb") as f:
                data = f.read(_MAX_FILE + 1)
        except FileNotFoundError:
            raise KeyNotFound(f"key {name!r} not found in {self.dir}: create it with `gpunet keys add {name}`, "
                              f"or run `gpunet keys list` to see the keys there") from None
        except OSError as e:
            raise KeyringError(f"read key file: {e}") from None
        if len(data) > _MAX_FILE:
            raise KeyringError(f"invalid key file {path}: larger than {_MAX_FILE} bytes")
        try:
            k = decode_key_file(data)
        except KeyringError as e:
            raise KeyringError(f"invalid key file {path}: {e}") from None
        if k.name != name:
            raise KeyringError(f"invalid key file {path}: holds key {k.name!r}, but the file name says {name!r}")
        return k

    def list(self) -> list[Key]:
        """Every key, sorted by name (encrypted ones locked)."""
        try:
            entries = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            if not e.endswith(".json"):
                continue
            name = e[:-5]
            try:
                validate_name(name)
            except UsageError:
                continue
            if os.path.isdir(os.path.join(self.dir, e)):
                continue
            try:
                out.append(self.lookup(name))
            except KeyNotFound:
                continue
        return out

    def find(self, address: str) -> Key | None:
        """The key with this address, or None."""
        address = parse_address(address)
        for k in self.list():
            if k.address == address:
                return k
        return None

    def _passphrase(self, name: str) -> bytes:
        if self._cached is not None:
            return self._cached
        p = self._pass
        if callable(p):
            p = p(name)
        if p is not None:
            b = p.encode() if isinstance(p, str) else bytes(p)
            if not b:
                raise NoPassphrase(f"key {name!r} is encrypted: the passphrase given is empty")
        elif self._pass_file:
            b = read_passphrase_file(self._pass_file)
        elif os.environ.get(PASSPHRASE_ENV):
            b = os.environ[PASSPHRASE_ENV].encode()
        else:
            raise NoPassphrase(f"key {name!r} is encrypted: no passphrase for it: pass passphrase= or "
                               f"passphrase_file= to Client, or set ${PASSPHRASE_ENV}")
        self._cached = b
        return b

    def get(self, name: str) -> Key:
        """The key, opened (its encrypted half decrypted with the passphrase)."""
        k = self.lookup(name)
        if not k.locked:
            return k
        p = self._passphrase(name)
        try:
            plain = age.decrypt(age.unarmor(k._sealed), [age.ScryptIdentity(p)])  # type: ignore[attr-defined]
        except age.NoIdentityMatch:
            self._cached = None
            raise WrongPassphrase(f"key {name!r} ({self._path(name)}): wrong passphrase") from None
        except age.AgeError as e:
            raise KeyringError(f'key {name!r} ({self._path(name)}): field "encrypted_secret": {e}') from None
        try:
            sf = json.loads(plain)
            if not isinstance(sf, dict) or set(sf) - {"private_key_seed", "x25519_identity"}:
                raise ValueError("unexpected fields")
        except ValueError as e:
            raise KeyringError(f'key {name!r}: field "encrypted_secret" holds malformed JSON: {e}') from None
        priv, ident = _secret(sf.get("private_key_seed", ""), sf.get("x25519_identity", ""))
        if _pub(priv) != k.public_key:
            raise KeyringError(f'key {name!r}: the encrypted secret does not match field "public_key" (the file was altered or corrupted)')
        if str(ident.recipient()) != k.recipient:
            raise KeyringError(f'key {name!r}: the encrypted identity does not match field "x25519_recipient" (the file was altered or corrupted)')
        k._priv, k._identity = priv, ident
        return k


def default_home() -> str:
    """$GPUNET_HOME, else ~/.gpunet (as the CLI's --home)."""
    h = os.environ.get("GPUNET_HOME")
    if h:
        return h
    return os.path.join(os.path.expanduser("~"), ".gpunet")
