"""The gpunet client: submit jobs, follow them, fetch their outputs, deploy
services, send SYNC — the operations of the ``gpunet`` CLI, against a
node's HTTP API, with the CLI's home and keyring.

    import gpunet
    c = gpunet.Client()                          # ~/.gpunet, the node in its config
    job = c.submit("examples/wordcount/job.yaml", key="alice")
    print(c.wait(job).state)                     # succeeded
    c.outputs(job, "result")                     # result/out/counts.txt
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import http.client
import io
import json
import os
import secrets
import shutil
import struct as _struct
import tempfile
import time
import urllib.parse
from typing import Any, BinaryIO, Callable, Iterator, Mapping

import yaml

from . import age, check as checkmod, jobspec, pack, tx as txmod
from .errors import (APIError, Error, IntegrityError, JobFailed, KeyringError, NotInBlockYet, NotOwnerError,
                     PriceError, SpecError, SpecProblem, TxError, UnmetError, Unreachable, UsageError)
from .keyring import Key, Keyring, default_home
from .types import (Balance, Deployed, Job, Offer, Quote, Service, ServiceQuote, Status, TxResult, build)
from .units import parse_amount

Progress = Callable[[int, int], None]
"""A progress callback: (bytes done, bytes in all; -1 when unknown)."""

TICKET_SCHEME = "Gpunet-Ticket"
_TICKET_LIFETIME = 300
_MAX_SEQUENCE_RETRIES = 30
_CODE_INSUFFICIENT_FEE = 10
_CODE_BAD_SEQUENCE = 5
_CODE_NOT_JOB_PARTY = 19
_CODE_JOB_STATE = 20
ACCESS_KEY_PREFIX = "sk-gpunet-"


def sign_ticket(key: Key, method: str, path: str, size: int, content_hash: bytes = b"\x00" * 32,
                expiry: int | None = None) -> str:
    """The Authorization header value of an upload ticket (blob.SignTicket)."""
    exp = int(time.time()) + _TICKET_LIFETIME if expiry is None else expiry
    nonce = secrets.token_bytes(12)
    b = (b"gpunet/blob-ticket/v1\x00" + method.encode() + b"\x00" + path.encode() + b"\x00" +
         _struct.pack(">Q", size & 0xFFFFFFFFFFFFFFFF) + content_hash + _struct.pack(">Q", exp & 0xFFFFFFFFFFFFFFFF) + nonce)
    sig = key.sign(b)
    b64 = lambda x: base64.urlsafe_b64encode(x).decode().rstrip("=")
    hash_part = "-" if content_hash == b"\x00" * 32 else content_hash.hex()
    return f"{TICKET_SCHEME} v1.{b64(key.public_key)}.{size}.{hash_part}.{exp}.{b64(nonce)}.{b64(sig)}"


def _node_from_home(home: str) -> str:
    path = os.path.join(home, "config", "gpunet.yaml")
    try:
        with open(path, "rb") as f:
            cfg = yaml.safe_load(f) or {}
    except FileNotFoundError:
        raise UsageError(f"no node to talk to: pass node=ADDR, or use the home of a running node ({home} is not a "
                         f"gpunet home (no config/gpunet.yaml): run `gpunet init --home {home}` or "
                         f"`gpunet devnet --home {home}`)") from None
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"no node to talk to: pass node=ADDR ({path}: {e})") from None
    api = cfg.get("api") if isinstance(cfg, dict) else None
    if not api or not isinstance(api, str):
        raise UsageError(f"no node to talk to: pass node=ADDR ({path} has no api)")
    return api


def _bases(node: str) -> list[str]:
    out = []
    for b in node.split(","):
        b = b.strip()
        if not b:
            continue
        if "://" not in b:
            b = "http://" + b
        b = b.rstrip("/")
        u = urllib.parse.urlsplit(b)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UsageError(f"node {b!r}: want host:port or an http(s) URL")
        if b not in out:
            out.append(b)
    if not out:
        raise UsageError("node is empty: want host:port or an http(s) URL")
    return out


class _Reader:
    """A file read in blocks, reporting progress."""

    def __init__(self, f: BinaryIO, total: int, progress: Progress | None):
        self.f, self.total, self.progress, self.done = f, total, progress, 0

    def read(self, n: int = -1) -> bytes:
        b = self.f.read(n if n and n > 0 else 1 << 16)
        self.done += len(b)
        if self.progress and b:
            self.progress(self.done, self.total)
        return b


class Client:
    """A client of a gpunet node, acting with the keys of a gpunet home.

    node: the node's API ("127.0.0.1:26680", "http://…", or several
    comma-separated nodes of one network, tried in turn when one is
    unreachable); default $GPUNET_NODE, else the API in the home's config.
    keyring: the gpunet home whose keyring signs (default $GPUNET_HOME, else
    ~/.gpunet). key: the key to sign with when a call names none (default:
    the only key of the keyring). passphrase, passphrase_file: for
    encrypted keys, as the CLI (else $GPUNET_KEYRING_PASSPHRASE)."""

    def __init__(self, node: str | None = None, keyring: str | os.PathLike | None = None, key: str | None = None,
                 passphrase: str | bytes | Callable[[str], str | bytes] | None = None,
                 passphrase_file: str | None = None, timeout: float = 120.0):
        self.home = os.path.expanduser(os.fspath(keyring)) if keyring is not None else default_home()
        self.keyring = Keyring(self.home, passphrase=passphrase, passphrase_file=passphrase_file)
        node = node or os.environ.get("GPUNET_NODE") or _node_from_home(self.home)
        self._bases = _bases(node)
        self._cur = 0
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise UsageError(f"timeout {timeout!r}: want seconds > 0")
        self.timeout = float(timeout)
        if key is not None:
            from .keyring import validate_name
            validate_name(key)
        self.default_key = key
        self._chain_id: str | None = None
        self._fee: tuple[int, float] | None = None
        self.services = Services(self)

    # ------------------------------------------------------------------
    # HTTP.

    @property
    def base(self) -> str:
        """The base URL of the node requests go to now."""
        return self._bases[self._cur]

    def _request(self, method: str, path: str, body: bytes | BinaryIO | None = None, headers: dict | None = None,
                 length: int | None = None, stream: bool = False, timeout: float | None = None):
        """Returns (status, response) with the response open when stream,
        else (status, body bytes)."""
        hdrs = dict(headers or {})
        last = None
        for attempt in range(len(self._bases)):
            base = self._bases[(self._cur + attempt) % len(self._bases)]
            u = urllib.parse.urlsplit(base)
            cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
            conn = cls(u.hostname, u.port, timeout=timeout or self.timeout)
            try:
                if body is not None and length is not None:
                    hdrs["Content-Length"] = str(length)
                conn.request(method, (u.path or "") + path, body=body, headers=hdrs)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                last = e
                if hasattr(body, "seek") and not isinstance(body, (bytes, bytearray)):
                    # A streamed body cannot be sent again.
                    break
                continue
            self._cur = (self._cur + attempt) % len(self._bases)
            if stream and resp.status < 400:
                return resp.status, resp
            data = resp.read()
            conn.close()
            return resp.status, data
        raise Unreachable(f"node unreachable at {', '.join(self._bases)}: {last} (is the node running? start one "
                          f"with `gpunet devnet` or `gpunet node`)")

    def _api(self, method: str, path: str, body: bytes | None = None, allow_tx: bool = False) -> Any:
        hdrs = {"Content-Type": "application/octet-stream"} if body is not None else {}
        status, data = self._request(method, path, body, hdrs, length=len(body) if body is not None else None)
        if status >= 400:
            try:
                eb = json.loads(data)
            except ValueError:
                eb = None
            if isinstance(eb, dict) and eb.get("message"):
                if allow_tx and eb.get("tx"):
                    return status, eb["tx"]
                raise APIError(eb["message"], status, eb.get("code", ""), eb.get("ledger_code", 0), eb.get("tx"))
            raise APIError(f"{method} {path}: HTTP {status}: {data[:500].decode('utf-8', 'replace').strip()}", status)
        try:
            out = json.loads(data) if data else None
        except ValueError as e:
            raise Error(f"decode response of {method} {path}: {e}") from None
        return (status, out) if allow_tx else out

    # ------------------------------------------------------------------
    # Keys.

    def _key_name(self, key: str | None) -> str:
        name = key or self.default_key
        if name:
            return name
        ks = self.keyring.list()
        if not ks:
            raise UsageError(f"no keys in {self.keyring.dir}: create one with `gpunet keys add NAME`, then pass key=NAME")
        if len(ks) == 1:
            return ks[0].name
        raise UsageError(f"name the key to sign with: key=NAME (keys in {self.keyring.dir}: {', '.join(k.name for k in ks)})")

    def key(self, name: str | None = None) -> Key:
        """The named key (or the default one), opened."""
        return self.keyring.get(self._key_name(name))

    def _address(self, who: str) -> str:
        """An address, or the address of a key of the keyring."""
        if not isinstance(who, str) or not who:
            raise UsageError(f"account {who!r}: want an address (gpu1…) or the name of a key")
        if who.startswith(txmod.ADDRESS_HRP + "1") and len(who) > 30:
            try:
                return txmod.parse_address(who)
            except ValueError as e:
                raise UsageError(str(e)) from None
        return self.keyring.lookup(who).address

    # ------------------------------------------------------------------
    # Chain.

    def status(self) -> Status:
        """The node's view of the chain (gpunet status)."""
        return build(Status, self._api("GET", "/v1/status"))

    def chain_id(self) -> str:
        if self._chain_id is None:
            self._chain_id = self.status().chain_id
        return self._chain_id

    def balance(self, account: str | None = None) -> Balance:
        """An account's balance in usync: an address, a key's name, or (by
        default) the default key's."""
        addr = self._address(account) if account else self.keyring.lookup(self._key_name(None)).address
        return build(Balance, self._api("GET", f"/v1/accounts/{addr}/balance"))

    def account(self, account: str | None = None) -> dict:
        addr = self._address(account) if account else self.keyring.lookup(self._key_name(None)).address
        return self._api("GET", f"/v1/accounts/{addr}")

    def _min_fee(self, fresh: bool) -> int:
        if self._fee and not fresh and time.monotonic() - self._fee[1] < 60:
            return self._fee[0]
        p = self._api("GET", "/v1/params")
        fee = int(p.get("min_fee", 0))
        self._fee = (fee, time.monotonic())
        return fee

    def build_tx(self, msg: tuple[int, Any], key: Key, sequence: int, fee: int = 0) -> txmod.Tx:
        """A signed tx of msg (a tx.msg_* value) from key."""
        return txmod.Tx(self.chain_id(), sequence, fee, msg).sign(key.private_key())

    def broadcast(self, raw: bytes, wait: bool = True) -> TxResult:
        """Submits a signed tx; with wait, returns once it is in a block.
        Raises TxError for a tx refused or failed, NotInBlockYet when the
        node stopped waiting first."""
        status, res = self._api("POST", "/v1/txs" + ("" if wait else "?wait=false"), raw, allow_tx=True)
        r = build(TxResult, res or {})
        if r.code != 0:
            raise TxError(r)
        if wait and status == 202:
            raise NotInBlockYet(f"tx {r.tx_hash} accepted but not in a block yet; check later with its hash")
        return r

    def send_msg(self, msg: tuple[int, Any], key: str | Key | None = None, fee: int = 0, wait: bool = True) -> TxResult:
        """Signs msg with the account's next sequence, submits it and waits
        for its block, retrying as the Go client does when another tx of
        the same key takes the sequence first."""
        k = key if isinstance(key, Key) else self.key(key)
        refreshed = False
        attempt = 0
        while True:
            attempt += 1
            min_fee = self._min_fee(refreshed)
            acct = self._api("GET", f"/v1/accounts/{k.address}")
            t = self.build_tx(msg, k, int(acct.get("next_sequence", 0)), max(fee, min_fee))
            try:
                return self.broadcast(t.encode(), wait)
            except TxError as e:
                if not refreshed and e.result.height == 0 and e.code == _CODE_INSUFFICIENT_FEE:
                    refreshed = True
                    continue
                if attempt < _MAX_SEQUENCE_RETRIES and e.result.height == 0 and e.code == _CODE_BAD_SEQUENCE:
                    time.sleep(min(attempt * 0.1, 1.0))
                    continue
                raise

    def send(self, to: str, amount: int | str, key: str | None = None) -> TxResult:
        """Sends amount (usync as an int, or "2.5sync", "1500usync") to an
        address or a key of the keyring (gpunet tx send)."""
        try:
            amt = parse_amount(amount)
        except ValueError as e:
            raise UsageError(str(e)) from None
        return self.send_msg(txmod.msg_send(self._address(to), amt), key)

    # ------------------------------------------------------------------
    # Market.

    def offers(self, query: str = "", sort: str = "", all: bool = False) -> list[Offer]:
        """The offers matching query ("gpu=RTX_4090 count>=2 price<0.5"),
        sorted by sort ("price-"), every page; all includes providers that
        cannot take jobs now. A bad query is an APIError (invalid_argument)
        naming the term."""
        if not isinstance(query, str) or not isinstance(sort, str):
            raise UsageError("query and sort are strings")
        out, cursor = [], ""
        while True:
            q = {"q": query, "sort": sort, "limit": "1000"}
            if all:
                q["all"] = "true"
            if cursor:
                q["cursor"] = cursor
            page = self._api("GET", "/v1/offers?" + urllib.parse.urlencode(q))
            out += [build(Offer, o) for o in page.get("offers") or []]
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return out

    def provider(self, address: str) -> dict:
        return self._api("GET", f"/v1/providers/{self._address(address)}")

    def _spec(self, spec_or_path: Any) -> jobspec.Spec:
        if isinstance(spec_or_path, jobspec.Spec):
            return spec_or_path
        if isinstance(spec_or_path, dict):
            return jobspec.parse_spec(yaml.safe_dump(spec_or_path, sort_keys=False), os.getcwd())
        if isinstance(spec_or_path, (bytes, bytearray)) or (isinstance(spec_or_path, str) and "\n" in spec_or_path):
            s = jobspec.parse_spec(spec_or_path, os.getcwd())
            jobspec._check_files(s)
            return s
        if isinstance(spec_or_path, (str, os.PathLike)):
            return jobspec.load_spec(spec_or_path)
        raise UsageError(f"spec {spec_or_path!r}: want a path, YAML text, a dict or a gpunet.Spec")

    def _job_spec(self, spec_or_path: Any) -> jobspec.Spec:
        s = self._spec(spec_or_path)
        if s.is_service:
            raise UsageError("the spec is a service (kind: service), not a job: deploy it with client.services.deploy")
        return s

    def quote(self, spec_or_path: Any) -> Quote:
        """Who can run the spec now, at what price, or why nobody can (gpunet quote)."""
        s = self._job_spec(spec_or_path)
        return build(Quote, self._api("POST", "/v1/quote", txmod.go_json(s.quote_spec()).encode()))

    def _check(self, s: jobspec.Spec) -> None:
        """Raises what submit refuses unless queue=True, before anything is
        uploaded or locked (check.py): UnmetError for a requirement no
        online provider meets at any price, PriceError for a max_price
        below every ask that fits. A job that would wait only for a busy
        provider passes."""
        q = self.quote(s)
        if not q.code:
            return
        try:
            qa = self.quote(dataclasses.replace(s, max_price=checkmod.MAX_JOB_PRICE_PER_HOUR))
        except APIError:  # not the spec's fault (it was quoted once): judge by the price alone
            qa = None
        unmet = checkmod.unmet_by(qa, s) if qa is not None else []
        if unmet:
            try:
                offs = self.offers()
            except Error:  # what is offered instead is a description: without it, vaguer
                offs = []
            for u in unmet:
                if not u.offered:
                    u.offered = checkmod.describe_offered(u.field, s, offs)
            raise UnmetError(unmet, ((qa.raw or {}).get("miss") or {}).get("seen", 0), qa)
        if q.code == "over_price":
            raise PriceError(s.max_price, q)

    # ------------------------------------------------------------------
    # Blobs.

    def upload(self, f: BinaryIO, size: int, key: Key, progress: Progress | None = None) -> str:
        """Uploads size bytes read from f to the node's blob gateway,
        charged to key's account, and returns the blob's name (sha256:…),
        checked against what was sent."""
        path = "/v1/blobs"
        h = hashlib.sha256()

        class _Hashing(_Reader):
            def read(self, n=-1):
                b = super().read(n)
                h.update(b)
                return b

        body = _Hashing(f, size, progress)
        hdrs = {"Content-Type": "application/octet-stream", "Authorization": sign_ticket(key, "PUT", path, size)}
        status, data = self._request("PUT", path, body, hdrs, length=size)
        if status >= 400:
            try:
                eb = json.loads(data)
                raise APIError(f"blob upload: gateway answered {status}: {eb.get('message', '')}", status, eb.get("code", ""))
            except ValueError:
                raise APIError(f"blob upload: gateway answered {status}", status) from None
        pr = json.loads(data)
        want = "sha256:" + h.hexdigest()
        if pr.get("hash") != want or pr.get("size") != body.done:
            raise IntegrityError(f"blob upload: sent {body.done} bytes hashing to {want}, gateway stored {pr.get('size')} bytes as {pr.get('hash')}")
        return want

    def download(self, ref: str, w: BinaryIO, job: int = 0, progress: Progress | None = None) -> int:
        """Streams blob ref into w, checking its hash, and returns its size."""
        if not jobspec._BLOB_REF.match(ref or ""):
            raise UsageError(f"blob {ref!r}: want sha256:<64 hex>")
        path = f"/v1/blobs/{ref}" + (f"?job={job}" if job else "")
        status, resp = self._request("GET", path, stream=True)
        if status >= 400:
            try:
                eb = json.loads(resp)
            except ValueError:
                eb = {}
            raise APIError(f"blob download {ref}: gateway answered {status}: {eb.get('message', '')}", status, eb.get("code", ""))
        total = int(resp.getheader("Content-Length") or -1)
        h, n = hashlib.sha256(), 0
        try:
            while True:
                b = resp.read(1 << 16)
                if not b:
                    break
                h.update(b)
                w.write(b)
                n += len(b)
                if progress:
                    progress(n, total)
        finally:
            resp.close()
        if "sha256:" + h.hexdigest() != ref:
            raise IntegrityError(f"blob download: asked for {ref}, received {n} bytes hashing to sha256:{h.hexdigest()}")
        return n

    def _upload_sealed(self, to: age.X25519Recipient, produce: Callable[[BinaryIO], None], key: Key,
                       progress: Progress | None) -> str:
        with tempfile.TemporaryFile(prefix="gpunet-") as tmp:
            w = age.EncryptWriter(tmp, [to])
            produce(w)  # type: ignore[arg-type]
            w.close()
            size = tmp.tell()
            tmp.seek(0)
            return self.upload(tmp, size, key, progress)

    # ------------------------------------------------------------------
    # Jobs.

    def _jobs_dir(self) -> str:
        return os.path.join(self.home, "jobs", self.chain_id())

    def _save_job_key(self, job_id: int, k: age.X25519Identity) -> None:
        d = self._jobs_dir()
        os.makedirs(d, mode=0o700, exist_ok=True)
        p = os.path.join(d, f"{job_id}.key")
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(str(k) + "\n")

    def _load_job_key(self, job_id: int) -> age.X25519Identity:
        p = os.path.join(self._jobs_dir(), f"{job_id}.key")
        try:
            with open(p) as f:
                return age.X25519Identity.parse(f.read().strip())
        except FileNotFoundError:
            raise Error(f"job {job_id}'s key is not in {self._jobs_dir()} (was it submitted from another home?)") from None

    def _forget_job_key(self, j: Job, key: Key) -> None:
        if j.done and j.owner == key.address:
            try:
                os.remove(os.path.join(self._jobs_dir(), f"{j.id}.key"))
            except FileNotFoundError:
                pass

    def job(self, job_id: int | Job) -> Job:
        """A job as the ledger records it (gpunet job status)."""
        return build(Job, self._api("GET", f"/v1/jobs/{_job_id(job_id)}"))

    def jobs(self, owner: str | None = None, state: str = "", limit: int = 100) -> list[Job]:
        """The newest jobs, newest first: an owner's (address or key name), or anyone's."""
        q = {"limit": str(int(limit))}
        if owner:
            q["owner"] = self._address(owner)
        if state:
            q["state"] = state
        return [build(Job, j) for j in self._api("GET", "/v1/jobs?" + urllib.parse.urlencode(q)).get("jobs") or []]

    def submit(self, spec_or_path: Any, inputs: Mapping[str, str] | None = None, key: str | None = None,
               queue: bool = False, progress: Progress | None = None) -> int:
        """Validates the spec, seals its module and inputs under a fresh job
        key, uploads them, submits the job with escrow, grants the key if
        the job was placed in its block, and returns the job's id.

        spec_or_path: a spec file, YAML text, a dict or a parsed Spec.
        inputs: {guest path: local file or directory} replacing the from of
        the spec's input at that path, or adding one. queue: submit even
        when max_price is below every ask. progress: sees upload progress."""
        s = self._job_spec(spec_or_path)
        if inputs:
            s = _with_inputs(s, inputs)
        k = self.key(key)
        if not queue:
            self._check(s)
        job_key = age.X25519Identity.generate()
        module = ""
        mpath = s.local_module()
        if mpath:
            def produce_module(w):
                with open(mpath, "rb") as f:
                    shutil.copyfileobj(f, w, 1 << 16)
            module = self._upload_sealed(job_key.recipient(), produce_module, k, progress)
        elif s.executor == "wasm":
            raise UsageError("module: give a local .wasm file; a blob reference cannot be re-sealed to a new job key")
        files = {}
        for i, inp in enumerate(s.inputs):
            if jobspec.is_url(inp.from_):
                continue
            if jobspec.is_blob_ref(inp.from_):
                raise UsageError(f"inputs[{i}].from {inp.from_}: give a local file or directory; blob references are not supported yet")
            files[inp.path] = inp.from_
        input_blob = ""
        if files:
            input_blob = self._upload_sealed(job_key.recipient(), lambda w: pack.pack_files(w, files), k, progress)
        data_at = ""
        try:
            status, peers = self._request("GET", "/v1/net/peers")
            if status == 200:
                data_at = json.loads(peers).get("api_url", "") or ""
        except (Error, ValueError):
            pass
        msg = txmod.msg_submit_job(s.ledger_spec(module), k.recipient, input_blob,
                                   txmod.job_key_commitment(str(job_key)), data_at)
        res = self.send_msg(msg, k)
        jid = res.event("job_submitted", "job")
        if jid is None:
            raise Error(f"tx {res.tx_hash} has no job_submitted event")
        job_id = int(jid)
        self._save_job_key(job_id, job_key)
        try:
            self._grant_if_needed(self.job(job_id), k)
        except Error:
            pass  # wait, logs and outputs grant it later
        return job_id

    def _grant_if_needed(self, j: Job, k: Key) -> bool:
        if j.done:
            self._forget_job_key(j, k)
            return False
        if j.owner != k.address:
            return False
        grants, jk = [], None
        for a in j.assignments:
            if a.key_grant is not None:
                continue
            if jk is None:
                jk = self._load_job_key(j.id)
            p = self.provider(a.provider)
            enc = (p.get("record") or {}).get("encryption_key", "")
            try:
                rcpt = age.X25519Recipient.parse(enc)
            except ValueError as e:
                raise Error(f"provider {a.provider}: {e}") from None
            grants.append((a.provider, age.encrypt(str(jk).encode(), [rcpt])))
        if not grants:
            return False
        try:
            self.send_msg(txmod.msg_grant_key(j.id, grants), k)
        except TxError as e:
            # It moved on meanwhile (reassigned, cancelled): the next look sees it.
            if e.code in (_CODE_JOB_STATE, _CODE_NOT_JOB_PARTY):
                return False
            raise
        except NotInBlockYet:
            return True
        return True

    def _owner_key(self, j: Job, key: str | None, what: str) -> Key:
        if key is None and self.default_key is None:
            k = self.keyring.find(j.owner)
            if k is None:
                raise NotOwnerError(j.id, j.owner, f"any key in {self.keyring.dir} (only its owner can {what})")
            key = k.name
        k = self.key(key)
        if k.address != j.owner:
            raise NotOwnerError(j.id, j.owner, f"{k.name} ({k.address})")
        return k

    def wait(self, job_id: int | Job, timeout: float | None = None, poll: float = 0.25,
             on_change: Callable[[Job], None] | None = None, check: bool = False, key: str | None = None) -> Job:
        """Follows the job until it ends, granting its key whenever it is
        assigned (gpunet job wait), and returns it. on_change sees each new
        state or reason; timeout (seconds) raises TimeoutError; check
        raises JobFailed unless it succeeded."""
        jid = _job_id(job_id)
        _positive("poll", poll)
        if timeout is not None:
            _positive("timeout", timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        j = self.job(jid)
        k = self._owner_key(j, key, "follow it") if not j.done else None
        last = None
        while True:
            sig = (j.state, j.reason)
            if sig != last:
                last = sig
                if on_change:
                    on_change(j)
            if j.done:
                if k is not None:
                    self._forget_job_key(j, k)
                if check and not j.succeeded:
                    raise JobFailed(j)
                return j
            self._grant_if_needed(j, k)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {jid} is still {j.state} after {timeout}s ({j.reason})")
            time.sleep(poll)
            j = self.job(jid)

    def _log_page(self, jid: int, frm: int, ident: age.X25519Identity) -> tuple[list[bytes], int]:
        page = self._api("GET", f"/v1/jobs/{jid}/logs?from={frm}")
        out = []
        if page.get("dropped"):
            out.append(f"[gpunet: {page['dropped']} earlier log chunks are no longer held by the node]\n".encode())
        for ch in page.get("chunks") or []:
            try:
                out.append(age.decrypt(base64.b64decode(ch["data"]), [ident]))
            except (age.AgeError, ValueError, KeyError) as e:
                out.append(f"[gpunet: log chunk {ch.get('seq')} from {ch.get('provider')} unreadable: {e}]\n".encode())
        return out, int(page.get("next", frm))

    def _relay(self, jid: int, nxt: int, ident) -> Iterator[tuple[bytes, int]]:
        while True:
            chunks, n = self._log_page(jid, nxt, ident)
            for c in chunks:
                yield c, n
            if not chunks or n == nxt:
                return
            nxt = n

    def logs(self, job_id: int | Job, follow: bool = True, poll: float = 0.25, key: str | None = None) -> Iterator[bytes]:
        """The job's log, in chunks of bytes (gpunet job logs [-f]): with
        follow, its live log while it runs (granting its key when due) until
        it ends; once it is verifying or done, the full log of its result."""
        jid = _job_id(job_id)
        _positive("poll", poll)
        j = self.job(jid)
        k = self._owner_key(j, key, "read its logs")
        ident = k.identity()
        if j.done or j.state == "verifying" or not follow:
            yield from self._full_log(j, k, ident)
            return
        nxt = 0
        while not j.done:
            chunks, n = self._log_page(jid, nxt, ident)
            nxt = n
            yield from chunks
            try:
                self._grant_if_needed(j, k)
            except Error:
                pass
            time.sleep(poll)
            j = self.job(jid)
        for c, n in self._relay(jid, nxt, ident):
            nxt = n
            yield c

    def _full_log(self, j: Job, k: Key, ident) -> Iterator[bytes]:
        r = j.delivered_result()
        if r is not None:
            if r.log_blob:
                yield self._fetch_sealed(j.id, r.log_blob, ident)
            return
        got = False
        for c, _ in self._relay(j.id, 0, ident):
            got = True
            yield c
        if not got and j.done:
            p = os.path.join(self._jobs_dir(), f"{j.id}.log")
            try:
                with open(p, "rb") as f:
                    yield f.read()
            except FileNotFoundError:
                raise Error(f"job {j.id} {j.state}: the job ended without a result, and its live log is no longer "
                            f"held by the node nor kept here") from None

    def _fetch_sealed(self, jid: int, ref: str, ident, progress: Progress | None = None) -> bytes:
        buf = io.BytesIO()
        self.download(ref, buf, jid, progress)
        try:
            return age.decrypt(buf.getvalue(), [ident])
        except age.AgeError as e:
            raise IntegrityError(f"decrypt {ref}: {e}") from None

    def outputs(self, job_id: int | Job, dest: str | os.PathLike, progress: Progress | None = None,
                key: str | None = None) -> list[str]:
        """Downloads, decrypts and unpacks a finished job's outputs into dest
        (gpunet job get) and returns the files written, relative to dest."""
        jid = _job_id(job_id)
        j = self.job(jid)
        k = self._owner_key(j, key, "read its outputs")
        if not j.done:
            raise Error(f"job {jid} is {j.state} ({j.reason}); outputs arrive when it is done (client.wait({jid}))")
        r = j.delivered_result()
        if r is None:
            raise Error(f"job {jid} is {j.state} and has no result ({j.reason})")
        dest = os.fspath(dest)
        with tempfile.TemporaryFile(prefix="gpunet-blob-") as tmp:
            self.download(r.output_blob, tmp, jid, progress)
            tmp.seek(0)
            try:
                stream = age.decrypt_stream(tmp, [k.identity()])
                files = pack.unpack_dir(_IterReader(stream), dest)
            except age.AgeError as e:
                raise IntegrityError(f"decrypt {r.output_blob}: {e}") from None
        try:
            path = f"/v1/jobs/{jid}/fetched"
            self._request("POST", path, b"", {"Authorization": sign_ticket(k, "POST", path, 0)}, length=0)
        except Error:
            pass  # it only lets the node free the outputs sooner
        return files

    def cancel(self, job_id: int | Job, key: str | None = None) -> Job:
        """Cancels a job as its owner (gpunet job cancel) and returns it as
        settled: cost and fee paid for the time it held or ran, refund the
        rest. The live log so far is kept for logs()."""
        jid = _job_id(job_id)
        j = self.job(jid)
        k = self._owner_key(j, key, "cancel it")
        if j.done:
            raise Error(f"job {jid} {j.state}: the job has ended; there is nothing to cancel")
        ident = k.identity()
        log, nxt = [], 0
        try:
            for c, nxt in self._relay(jid, 0, ident):
                log.append(c)
        except Error:
            pass
        self.send_msg(txmod.msg_cancel_job(jid), k)
        try:
            for c, nxt in self._relay(jid, nxt, ident):
                log.append(c)
        except Error:
            pass
        if log:
            os.makedirs(self._jobs_dir(), mode=0o700, exist_ok=True)
            with open(os.path.join(self._jobs_dir(), f"{jid}.log"), "wb") as f:
                f.write(b"".join(log))
        j = self.job(jid)
        self._forget_job_key(j, k)
        return j

    def run(self, spec_or_path: Any, dest: str | os.PathLike | None = None, **kw) -> Job:
        """submit, wait, then outputs into dest (default ./job-ID) (gpunet job run)."""
        jid = self.submit(spec_or_path, **{k: v for k, v in kw.items() if k in ("inputs", "key", "queue", "progress")})
        j = self.wait(jid, **{k: v for k, v in kw.items() if k in ("timeout", "poll", "on_change")})
        if j.delivered_result() is not None:
            self.outputs(j, dest if dest is not None else f"job-{jid}")
        return j


class _IterReader(io.RawIOBase):
    """A file over an iterator of byte chunks."""

    def __init__(self, it):
        self._it, self._buf = it, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _job_id(j: int | Job) -> int:
    if isinstance(j, Job):
        return j.id
    if isinstance(j, bool) or not isinstance(j, int) or j <= 0:
        raise UsageError(f"job id {j!r}: want a positive integer")
    return j


def _positive(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise UsageError(f"{name} {v!r}: want seconds > 0")


def _with_inputs(s: jobspec.Spec, inputs: Mapping[str, str]) -> jobspec.Spec:
    import copy
    s = copy.deepcopy(s)
    for guest, local in inputs.items():
        if not isinstance(guest, str) or not isinstance(local, (str, os.PathLike)):
            raise UsageError(f"inputs: want {{guest path: local path}}, got {guest!r}: {local!r}")
        for i in s.inputs:
            if i.path == guest:
                i.from_ = os.fspath(local)
                break
        else:
            s.inputs.append(jobspec.Input(path=guest, from_=os.fspath(local)))
    problems = jobspec._Validator(s).run()
    if problems:
        raise SpecError(jobspec._sort(problems))
    jobspec._check_files(s)
    return s


class Services:
    """Services (kind: service): deploy, status, stop, key, quote, scale,
    top_up. Reached as client.services."""

    def __init__(self, c: Client):
        self._c = c

    def _spec(self, spec_or_path: Any, replicas: int | None, budget: int | str | None, public: bool | None) -> jobspec.Spec:
        s = self._c._spec(spec_or_path)
        if not s.is_service:
            raise UsageError(f"the spec is a batch job spec (kind: {s.kind}): add kind: service to deploy it as a service, or run it with client.submit")
        if replicas is not None:
            if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= jobspec.MAX_REPLICAS:
                raise UsageError(f"replicas {replicas!r}: want 1 to {jobspec.MAX_REPLICAS}")
            s.replicas = replicas
        if budget is not None:
            try:
                s.budget = parse_amount(budget)
            except ValueError as e:
                raise UsageError(f"budget: {e}") from None
        if public:
            s.public = True
        problems = jobspec._Validator(s).run()
        if problems:
            raise SpecError(jobspec._sort(problems))
        return s

    def quote(self, spec_or_path: Any, replicas: int | None = None, budget: int | str | None = None) -> ServiceQuote:
        """What deploying the service would cost now (gpunet service quote)."""
        s = self._spec(spec_or_path, replicas, budget, None)
        body = txmod.go_json(txmod.struct(("spec", s.service_spec(), False), ("budget", s.budget, False)))
        return build(ServiceQuote, self._c._api("POST", "/v1/services/quote", body.encode()))

    def deploy(self, spec_or_path: Any, key: str | None = None, replicas: int | None = None,
               budget: int | str | None = None, public: bool | None = None) -> Deployed:
        """Deploys a service, locking its budget in escrow (gpunet service
        deploy). A private service gets an access key, returned once and
        kept in HOME/services/ID.key."""
        s = self._spec(spec_or_path, replicas, budget, public)
        k = self._c.key(key)
        access = None
        hashes = []
        if not s.public:
            access = ACCESS_KEY_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
            hashes = [txmod.service_key_hash(access)]
        spec = s.service_spec()
        res = self._c.send_msg(txmod.msg_deploy_service(spec, s.budget, k.recipient, s.public, hashes), k)
        sid = res.event("service_deployed", "service")
        if not sid:
            raise Error(f"tx {res.tx_hash} has no service_deployed event")
        sid = int(sid)
        key_file = self._save_key(sid, access) if access else None
        node = self._c.base
        addrs = {"ports": [{"port": p["port"], "name": p.get("name", ""), "protocol": p["protocol"],
                            "url": f"{node}/svc/{sid}/{p['port']}/"} for p in spec["ports"]]}
        if "openai" in spec:
            addrs["openai"], addrs["models"] = node + "/openai/v1", spec["openai"]["models"]
        return Deployed(sid, access, key_file, addrs, res)

    def _key_file(self, sid: int) -> str:
        return os.path.join(self._c.home, "services", f"{sid}.key")

    def _save_key(self, sid: int, access: str) -> str:
        p = self._key_file(sid)
        os.makedirs(os.path.dirname(p), mode=0o700, exist_ok=True)
        tmp = p + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(access + "\n")
        os.replace(tmp, p)
        return p

    def key(self, service_id: int) -> str:
        """The access key of a service deployed from this home (gpunet service key)."""
        sid = _service_id(service_id)
        try:
            with open(self._key_file(sid)) as f:
                k = f.read().strip()
        except FileNotFoundError:
            raise Error(f"no access key of service {sid} in {os.path.dirname(self._key_file(sid))} (it was deployed "
                        f"public, or from another home); make a new one with: gpunet service access {sid} --new-key") from None
        if not k.startswith(ACCESS_KEY_PREFIX):
            raise Error(f"{self._key_file(sid)} does not hold an access key (sk-gpunet-…)")
        return k

    def status(self, service_id: int) -> Service:
        """A service as the ledger records it (gpunet service status)."""
        return build(Service, self._c._api("GET", f"/v1/services/{_service_id(service_id)}"))

    def _owner(self, sid: int, key: str | None) -> Key:
        svc = self.status(sid)
        if key is None and self._c.default_key is None:
            k = self._c.keyring.find(svc.owner)
            if k is None:
                raise Error(f"service {sid} belongs to {svc.owner}, whose key is not in {self._c.keyring.dir}")
            key = k.name
        k = self._c.key(key)
        if k.address != svc.owner:
            raise Error(f"service {sid} belongs to {svc.owner}, not to {k.name} ({k.address})")
        return k

    def stop(self, service_id: int, key: str | None = None) -> Service:
        """Stops a service: its replicas are paid to now, the rest of its
        budget comes back (gpunet service stop)."""
        sid = _service_id(service_id)
        self._c.send_msg(txmod.msg_stop_service(sid), self._owner(sid, key))
        return self.status(sid)

    def scale(self, service_id: int, replicas: int, key: str | None = None) -> Service:
        sid = _service_id(service_id)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= jobspec.MAX_REPLICAS:
            raise UsageError(f"replicas {replicas!r}: want 1 to {jobspec.MAX_REPLICAS}")
        self._c.send_msg(txmod.msg_scale_service(sid, replicas), self._owner(sid, key))
        return self.status(sid)

    def top_up(self, service_id: int, amount: int | str, key: str | None = None) -> Service:
        sid = _service_id(service_id)
        try:
            amt = parse_amount(amount)
        except ValueError as e:
            raise UsageError(str(e)) from None
        self._c.send_msg(txmod.msg_top_up_service(sid, amt), key)
        return self.status(sid)


def _service_id(s: Any) -> int:
    if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
        raise UsageError(f"service id {s!r}: want a positive integer")
    return s
