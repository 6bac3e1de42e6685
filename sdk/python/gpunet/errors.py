"""The exceptions of the gpunet client. Every one is a gpunet.Error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


class Error(Exception):
    """The base of every error the client raises."""


class UsageError(Error, ValueError):
    """A value passed to the client is wrong (the message says which and
    what would be right)."""


class KeyringError(Error):
    """A key cannot be loaded: missing, malformed, or locked."""


class NoPassphrase(KeyringError):
    """The key is encrypted and no passphrase was given (pass passphrase=,
    passphrase_file=, or set $GPUNET_KEYRING_PASSPHRASE)."""


class WrongPassphrase(KeyringError):
    """The passphrase does not decrypt the key."""


class KeyNotFound(KeyringError):
    """No key of that name in the keyring."""


@dataclass
class SpecProblem:
    """One problem with a job spec, as the Go CLI reports it: the field's
    path ("resources.gpu.count", "inputs[1].from"), its 1-based line and
    column (0 when unknown), and what is wrong."""

    message: str
    field: str = ""
    line: int = 0
    column: int = 0
    file: str = ""

    def __str__(self) -> str:
        s = ""
        if self.file and self.line:
            s = f"{self.file}:{self.line}:{self.column}: "
        elif self.file:
            s = f"{self.file}: "
        elif self.line:
            s = f"line {self.line}, column {self.column}: "
        if self.field:
            s += self.field + ": "
        return s + self.message


class SpecError(Error, ValueError):
    """A job or service spec is invalid; problems lists every problem found,
    ordered by position."""

    def __init__(self, problems: Sequence[SpecProblem]):
        self.problems = list(problems)
        if len(self.problems) == 1:
            msg = str(self.problems[0])
        else:
            msg = f"{len(self.problems)} problems in the job spec:" + "".join("\n  " + str(p) for p in self.problems)
        super().__init__(msg)


class APIError(Error):
    """An error answer of a node's API. code is the API's stable error code
    (invalid_argument, not_found, tx_rejected, …; see the node's OpenAPI
    document); ledger_code the ledger's code behind it, if any."""

    def __init__(self, message: str, status: int = 0, code: str = "", ledger_code: int = 0, tx: Any = None):
        super().__init__(message)
        self.message, self.status, self.code, self.ledger_code, self.tx = message, status, code, ledger_code, tx


class Unreachable(Error, ConnectionError):
    """The node could not be reached at all."""


class TxError(Error):
    """A tx the ledger refused (at admission, height 0) or that failed in
    its block. code is the ledger's error code, result the TxResult."""

    def __init__(self, result: Any):
        self.result = result
        self.code = result.code
        where = f"failed in block {result.height}" if result.height > 0 else "rejected"
        super().__init__(f"tx {where} (code {result.code}): {result.log}")


class NotInBlockYet(Error):
    """The node accepted the tx into its mempool but no block held it
    before the node stopped waiting; it is not a failure of the tx."""


class NotOwnerError(Error):
    """Only a job's owner may read its logs and outputs or cancel it."""

    def __init__(self, job: int, owner: str, key: str):
        self.job, self.owner, self.key = job, owner, key
        super().__init__(f"job {job} belongs to {owner}, not to {key}")


class PriceError(Error):
    """The spec's max_price is below every ask that fits it: submitted, it
    would wait for a cheaper provider (pass queue=True to submit anyway)."""

    def __init__(self, max_price: int, quote: Any):
        self.max_price, self.quote = max_price, quote
        super().__init__(f"max_price {max_price} usync/h is below every ask that fits this job ({quote.reason}); "
                         "raise max_price, or pass queue=True to submit it anyway and wait for a cheaper provider")


@dataclass
class Unmet:
    """One requirement of a spec that no online provider, or not enough of
    them, meets: the spec's field ("resources.gpu.count"), what it asks
    ("1 GPU"), how many providers it turned away (0 when none offers the
    job's class at all), and what the network offers instead."""

    field: str
    want: str
    providers: int = 0
    offered: str = ""


class UnmetError(Error):
    """The spec asks for something no online provider offers at any price
    (a GPU model, GPU count or VRAM, cores, memory, disk, executor, region,
    network, distinct providers for its verification): submitted, it would
    lock its escrow and wait until such a provider comes (pass queue=True
    to submit it anyway)."""

    def __init__(self, unmet: Sequence[Unmet], seen: int, quote: Any):
        self.unmet, self.seen, self.quote = list(unmet), seen, quote
        parts = []
        for u in self.unmet:
            p = f"{u.field} {u.want}, where the network offers {u.offered}"
            if u.providers:
                p += f" ({u.providers} of the {seen} providers it could use fall short on it)"
            parts.append(p)
        super().__init__("no online provider can run this job, at any price: " + "; ".join(parts) +
                         "; change the spec, or pass queue=True to submit it anyway and wait for such a provider")


class JobFailed(Error):
    """wait(..., check=True) saw the job end failed or cancelled."""

    def __init__(self, job: Any):
        self.job = job
        super().__init__(f"job {job.id} {job.state}: {job.reason}")


class IntegrityError(Error):
    """Data from a node or a gateway is not what was asked for: a blob that
    does not hash to its name, a sealed file that does not open."""
