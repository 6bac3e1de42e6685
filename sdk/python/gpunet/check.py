"""What submit refuses before anything is uploaded or escrow locked (the
Go client's jobclient.Check): a requirement no online provider meets at
any price, or a max_price below every ask that fits. Both would wait: for
a provider that may never come, or a cheaper one."""

from __future__ import annotations

import math
from typing import Any

from . import jobspec
from .errors import Unmet
from .units import format_bytes

MAX_JOB_PRICE_PER_HOUR = 10 ** 12 * 64
"""The highest max_price_per_hour a job may offer (ledger.MaxJobPricePerHour):
quoted at it, the providers that fit are those that meet every requirement,
whatever they ask."""

SCAN_LIMIT = 2048
"""The offers one placement looks at (sched.ScanLimit): a quote that saw as
many may have missed one that fits."""


def unmet_by(q: Any, s: jobspec.Spec) -> list[Unmet]:
    """What q, a quote of s at any price, says no online provider meets:
    none when a provider that fits is only busy, under-staked or on another
    wasm engine (it may take the job later), or when the scan was cut
    short."""
    m = (q.raw or {}).get("miss") or {}
    g = s.resources.gpu
    if not q.code or not m:
        return []
    if q.code == "no_offer":
        if g.count == 0:
            return [Unmet("resources.cpu", "CPU capacity")]
        if g.models:
            return [Unmet("resources.gpu.models", " or ".join(g.models))]
        return [Unmet("resources.gpu.count", _gpus(g.count))]
    if q.code not in ("no_fit", "too_few"):
        return []
    if m.get("busy") or m.get("stake") or m.get("no_engine") or m.get("other_engine") or m.get("seen", 0) >= SCAN_LIMIT:
        return []
    out = []
    for key, field, want in (
            ("executor", "executor", s.executor),
            ("cpu", "resources.cpu", f"{math.ceil(s.resources.cpu * 1000) / 1000:g} cores"),
            ("ram", "resources.memory", format_bytes(s.resources.memory)),
            ("disk", "resources.disk", format_bytes(s.resources.disk)),
            ("region", "region", f"{s.region} (region_required)"),
            ("network", "network", "true"),
            ("gpus", "resources.gpu.count", _gpus(g.count)),
            ("vram", "resources.gpu.min_vram", format_bytes(g.min_vram) + " per GPU"),
            ("compute_cap", "resources.gpu.min_compute_cap", g.min_compute_cap)):
        if m.get(key):
            out.append(Unmet(field, want, m[key]))
    fit, need = m.get("fit", 0), m.get("need", 0)
    if q.code == "too_few" and fit < need:
        out.append(Unmet("verification", f"{s.verification}: {need} distinct providers", offered=f"{fit} that can run it"))
    return out


def describe_offered(field: str, s: jobspec.Spec, offs: list) -> str:
    """What the providers offer for the field none of them meets: the
    largest size, the GPU models, the regions. offs are the schedulable
    offers, each summarising a provider by its most numerous GPU class."""
    if not offs:
        return "no provider that can take jobs now"
    models = s.resources.gpu.models
    gpu_offs = [o for o in offs if o.gpu in models] if models else offs
    if field == "resources.cpu":
        return f"at most {max(o.cpu for o in offs)} cores"
    if field in ("resources.gpu.models", "resources.gpu.count"):
        if field == "resources.gpu.count" and gpu_offs and max(o.count for o in gpu_offs) > 0:
            return f"at most {max(o.count for o in gpu_offs)} GPUs on one provider"
        if not any(o.count > 0 for o in offs):
            return f"no GPUs: {len(offs)} CPU-only provider(s)"
        return _counted(offs, lambda o: o.gpu, "GPU classes")
    if field == "resources.gpu.min_vram":
        return f"at most {_num(max((o.vram for o in gpu_offs), default=0))} GiB per GPU"
    if field == "resources.gpu.min_compute_cap":
        return "compute capabilities " + (", ".join(sorted({o.compute_cap for o in gpu_offs if o.compute_cap})) or "none")
    if field == "resources.memory":
        return f"at most {_num(max(o.ram for o in offs))} GiB"
    if field == "resources.disk":
        return f"at most {_num(max(o.disk for o in offs))} GiB free"
    if field == "executor":
        return _counted(offs, lambda o: "+".join(o.executor), "executors")
    if field == "region":
        return _counted(offs, lambda o: o.region, "regions")
    if field == "network":
        return "no provider that allows network access (gpunet provider start --allow-network)"
    return f"{len(offs)} provider(s)"


def _counted(offs: list, key, what: str) -> str:
    n: dict[str, int] = {}
    for o in offs:
        n[key(o)] = n.get(key(o), 0) + 1
    return what + " " + ", ".join(f"{k or 'none'} ({n[k]})" for k in sorted(n))


def _num(f: float) -> str:
    s = f"{f:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _gpus(n: int) -> str:
    return "1 GPU" if n == 1 else f"{n} GPUs"
