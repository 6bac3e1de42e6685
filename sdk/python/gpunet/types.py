"""Typed results: what the node's API answers, as dataclasses. Each keeps
the whole JSON object it was made from in ``raw`` (fields added to the API
later are there before this module names them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

_FINAL = ("succeeded", "failed", "cancelled")


def _build(cls, d: dict | None):
    if d is None:
        return None
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name == "raw":
            continue
        key = f.metadata.get("json", f.name)
        if key in d:
            conv = f.metadata.get("conv")
            kw[f.name] = conv(d[key]) if conv else d[key]
    obj = cls(**kw)
    obj.raw = d
    return obj


def _f(json_name: str | None = None, conv=None, default: Any = None, factory=None):
    md = {}
    if json_name:
        md["json"] = json_name
    if conv:
        md["conv"] = conv
    if factory is not None:
        return field(default_factory=factory, metadata=md)
    return field(default=default, metadata=md)


@dataclass
class Event:
    type: str = ""
    attrs: dict = _f(conv=lambda a: {x["key"]: x["value"] for x in (a or [])}, factory=dict)
    raw: dict = field(default_factory=dict, repr=False)


def _events(v):
    return [_build(Event, e) for e in (v or [])]


@dataclass
class TxResult:
    """A tx's outcome: hash, the block that holds it, the ledger's code (0:
    success) and log, and the events it caused."""

    tx_hash: str = ""
    height: int = 0
    code: int = 0
    log: str = ""
    events: list = _f(conv=_events, factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    def event(self, type_: str, attr: str) -> str | None:
        for e in self.events:
            if e.type == type_ and attr in e.attrs:
                return e.attrs[attr]
        return None


@dataclass
class Status:
    chain_id: str = ""
    height: int = 0
    app_hash: str = ""
    api: str = ""
    moniker: str = ""
    node_id: str = ""
    catching_up: bool = False
    peers: int = 0
    latest_block_time: str = ""
    validators: list = _f(factory=list)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Balance:
    address: str = ""
    balance: int = 0  # usync
    denom: str = ""
    height: int = 0
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class JobResult:
    output_blob: str = ""
    log_blob: str = ""
    manifest_hash: str = ""
    metered_seconds: int = 0
    exit_code: int = 0
    failed: bool = False
    reason: str = ""
    height: int = 0
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Assignment:
    provider: str = ""
    price_per_hour: int = 0
    assigned_at: int = 0
    key_grant: str | None = None  # base64; None while the job key waits to be granted
    started_at: int = 0
    cls: str = _f("class", default="")
    extra: bool = False
    outcome: str = ""
    paid: int = 0
    result: JobResult | None = _f(conv=lambda r: _build(JobResult, r))
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Job:
    """A job as the ledger records it. state is one of queued, assigned,
    running, verifying, succeeded, failed, cancelled."""

    id: int = 0
    owner: str = ""
    state: str = ""
    reason: str = ""
    spec: dict = _f(factory=dict)
    escrow: int = 0
    cost: int = 0
    fee: int = 0
    refund: int = 0
    submitted_at: int = 0
    finished_at: int = 0
    replicas: int = 0
    verdict: str = ""
    delivered: str | None = None
    wait_code: str = ""
    assignments: list = _f(conv=lambda v: [_build(Assignment, a) for a in (v or [])], factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.state in _FINAL

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"

    def delivered_result(self) -> JobResult | None:
        if not self.delivered:
            return None
        for a in self.assignments:
            if a.provider == self.delivered:
                return a.result
        return None


@dataclass
class QuoteOffer:
    provider: str = ""
    price_per_hour: int = 0
    score: int = 0
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Quote:
    """What submitting a spec now would give: matching providers, the price
    per hour (usync), escrow; or, when it would wait, code and reason."""

    matching: int = 0
    price_per_hour: int = 0
    replicas: int = 0
    max_cost: int = 0
    escrow: int = 0
    reason: str = ""
    code: str = ""
    cheapest_ask: int = 0
    best: list = _f(conv=lambda v: [_build(QuoteOffer, o) for o in (v or [])], factory=list)
    tiers: list = _f(factory=list)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class ServiceQuote:
    matching: int = 0
    price_per_hour: int = 0
    rate_per_hour: int = 0
    replicas: int = 0
    budget: int = 0
    min_budget: int = 0
    lasts_seconds: int = 0
    reason: str = ""
    code: str = ""
    cheapest_ask: int = 0
    best: list = _f(conv=lambda v: [_build(QuoteOffer, o) for o in (v or [])], factory=list)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Offer:
    """A provider's offer (prices in SYNC per hour per unit, sizes in GiB)."""

    address: str = ""
    stake: int = 0
    online: bool = False
    gpu: str = ""
    count: int = 0
    vram: float = 0.0
    compute_cap: str = ""
    cpu: int = 0
    ram: float = 0.0
    disk: float = 0.0
    price: float = 0.0
    region: str = ""
    reputation: float = 0.0
    uptime: float = 0.0
    tops: float = 0.0
    executor: list = _f(factory=list)
    max_jobs: int = 0
    jobs: int = 0
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Service:
    """A service as the ledger records it."""

    id: int = 0
    owner: str = ""
    state: str = ""
    reason: str = ""
    spec: dict = _f(factory=dict)
    public: bool = False
    budget: int = 0
    escrow: int = 0
    cost: int = 0
    fee: int = 0
    refund: int = 0
    created_at: int = 0
    runs_out_at: int = 0
    replicas: list = _f(factory=list)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Deployed:
    """deploy's answer: the service id, its access key (None for a public
    service; shown this once, and kept in HOME/services/ID.key), the file
    it is kept in, its addresses and the tx."""

    id: int
    access_key: str | None
    key_file: str | None
    addresses: dict
    tx: TxResult


build = _build
