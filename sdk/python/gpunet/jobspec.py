"""Job and service specs (YAML), read and checked as the Go CLI reads and
checks them (internal/jobspec): every problem at once, each naming the
field ("resources.gpu.count", "inputs[1].from"), its line and column, and
what would be right. The rules are the ledger's; docs/jobspec.md documents
every field.

    >>> s = load_spec("examples/wordcount/job.yaml")
    >>> s.name, s.resources.memory
    ('wordcount', 268435456)
"""

from __future__ import annotations

import ipaddress
import math
import os
import posixpath
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import SpecError, SpecProblem
from .tx import Map, struct
from .units import (GiB, MiB, TiB, clip, format_bytes, format_duration, format_sync, goq, parse_bytes,
                    parse_duration, parse_price, parse_spec_amount, SECOND, USYNC_PER_SYNC)

# Limits: the ledger's (internal/ledger/spec.go) and the client's tighter ones.
MAX_JOB_ITEMS = 128
MAX_CPU = 1024
MIN_MEMORY, MAX_MEMORY = MiB, 4 * TiB
MIN_DISK, MAX_DISK = 1 << 20, 64 * TiB
MAX_VRAM = 4 * TiB
MAX_GPUS = 64
MIN_TIMEOUT, MAX_TIMEOUT = SECOND, 7 * 24 * 3600 * SECOND
MAX_OUTPUTS = 64
MAX_PRICE_LIMIT = 10 ** 6 * USYNC_PER_SYNC
MAX_SPEC_SIZE = 64 << 10
MAX_GUEST_PATH = 4096
MAX_LOCAL_PATH = 4096
MAX_ENV_KEY = 128
MAX_URL_INPUTS = 32
MAX_INPUT_URL = 2048
MIN_CKPT, MAX_CKPT = SECOND, 24 * 3600 * SECOND
DEFAULT_CKPT = 600 * SECOND
MAX_REPLICAS, MAX_PORTS, MAX_MODELS, MAX_MODEL_NAME = 16, 8, 16, 128
MIN_READY, MAX_READY, MAX_READY_START = SECOND, 3600 * SECOND, 86400 * SECOND
MAX_FAILURES = 100
MAX_READY_PATH = 256
MAX_BUDGET = 10 ** 12 * USYNC_PER_SYNC
PLACEHOLDER_MODULE = "sha256:" + "0" * 64
DIGEST_HINT = "find the digest with `gpunet image digest REF`"

_JOB_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")
_BLOB_REF = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_CLASS = re.compile(r"^[A-Z0-9][A-Z0-9_]{0,31}\Z")
_REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}\Z")
_COMPUTE_CAP = re.compile(r"^[0-9]{1,2}\.[0-9]{1,2}\Z")
_PORT_NAME = re.compile(r"^[a-z0-9-]{0,15}\Z")
_MODEL_NAME = re.compile(r"^[A-Za-z0-9._:/-]{1,128}\Z")
_IMAGE_NAME = re.compile(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?\Z")

SPEC_FIELDS = ["name", "executor", "module", "image", "command", "args", "env", "inputs", "outputs", "resources",
               "max_price", "timeout", "verification", "region", "region_required", "tier", "deterministic",
               "checkpoint", "network", "kind"]
SERVICE_FIELDS = ["name", "kind", "executor", "image", "command", "args", "env", "ports", "readiness", "replicas",
                  "resources", "max_price", "budget", "region", "region_required", "network", "openai", "public"]
_INPUT_FIELDS = ["path", "from", "sha256", "size"]
_RESOURCE_FIELDS = ["cpu", "memory", "disk", "gpu"]
_GPU_FIELDS = ["count", "models", "min_vram", "min_compute_cap"]
_CKPT_FIELDS = ["path", "interval"]
_PORT_FIELDS = ["port", "name", "protocol"]
_READY_FIELDS = ["path", "port", "interval", "timeout", "failure_threshold", "start"]
_OPENAI_FIELDS = ["port", "models"]

_ALIASES = {
    "": {"cpu": "resources.cpu", "cpus": "resources.cpu", "memory": "resources.memory", "mem": "resources.memory",
         "ram": "resources.memory", "disk": "resources.disk", "gpu": "resources.gpu", "gpus": "resources.gpu",
         "price": "max_price", "max_cost": "max_price", "port": "ports", "expose": "ports", "replica": "replicas",
         "instances": "replicas", "scale": "replicas", "health": "readiness", "healthcheck": "readiness",
         "health_check": "readiness", "readiness_probe": "readiness", "type": "kind", "entrypoint": "command",
         "cmd": "command", "environment": "env", "wasm": "module", "input": "inputs", "output": "outputs",
         "deadline": "timeout", "time_limit": "timeout", "verify": "verification", "replication": "verification"},
    "resources": {"cpus": "cpu", "cores": "cpu", "ram": "memory", "mem": "memory", "storage": "disk",
                  "gpus": "gpu", "vram": "gpu.min_vram"},
    "resources.gpu": {"model": "models", "type": "models", "class": "models", "vram": "min_vram",
                      "memory": "min_vram", "compute_cap": "min_compute_cap",
                      "compute_capability": "min_compute_cap", "min_compute_capability": "min_compute_cap",
                      "gpus": "count"},
    "ports[]": {"container_port": "port", "number": "port", "proto": "protocol"},
    "readiness": {"period": "interval", "every": "interval", "initial_delay": "start", "grace": "start",
                  "startup": "start", "failures": "failure_threshold", "threshold": "failure_threshold",
                  "url": "path"},
    "openai": {"model": "models"},
    "inputs[]": {"src": "from", "source": "from", "file": "from", "dest": "path", "target": "path", "to": "path",
                 "mount": "path"},
}

_BATCH_ONLY = [
    ("module", "a service runs an oci image (image:); wasm modules are for batch jobs"),
    ("inputs", "a service has no inputs: put the files it needs in its image"),
    ("outputs", "a service has no outputs: it runs until it is stopped, and nothing is collected"),
    ("timeout", "a service runs until it is stopped or its budget runs out: budget bounds what it costs"),
    ("verification", "a service has no result to verify by re-running; evict a replica that misbehaves with gpunet service evict"),
    ("checkpoint", "a service is not checkpointed: a replica that ends is started afresh on another provider"),
    ("tier", "a service has no tier: its replicas run until it is stopped"),
    ("deterministic", "says whether a batch job's outputs can be compared; a service has none"),
]
_SERVICE_ONLY = ["ports", "readiness", "replicas", "budget", "openai", "public"]
_EXECUTOR_ALIASES = {"docker": "oci", "container": "oci", "podman": "oci", "runc": "oci",
                     "wasi": "wasm", "webassembly": "wasm", "wasmtime": "wasm", "wazero": "wasm"}
_KIND_INVALID = "(invalid)"


@dataclass
class Input:
    path: str = ""
    from_: str = ""  # a local file or directory, a blob "sha256:…", or an http(s) URL
    sha256: str = ""
    size: int = 0


@dataclass
class GPU:
    count: int = 0
    models: list[str] = field(default_factory=list)
    min_vram: int = 0
    min_compute_cap: str = ""


@dataclass
class Resources:
    cpu: float = 0.0
    memory: int = 0
    disk: int = 0
    gpu: GPU = field(default_factory=GPU)


@dataclass
class Checkpoint:
    path: str = ""
    interval: int = 0  # nanoseconds


@dataclass
class Port:
    port: int = 0
    name: str = ""
    protocol: str = ""


@dataclass
class Readiness:
    port: int = 0
    path: str = ""
    interval: int = 0
    timeout: int = 0
    failure_threshold: int = 0
    start: int = 0


@dataclass
class OpenAI:
    port: int = 0
    models: list[str] = field(default_factory=list)


@dataclass
class Spec:
    """A parsed spec, defaults filled in, local paths joined to the spec's
    directory. Sizes are bytes, durations nanoseconds, prices and budgets
    usync."""

    name: str = ""
    kind: str = ""
    executor: str = ""
    module: str = ""
    image: str = ""
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    inputs: list[Input] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    resources: Resources = field(default_factory=Resources)
    max_price: int = 0
    timeout: int = 0
    verification: str = ""
    region: str = ""
    region_required: bool = False
    tier: str = ""
    deterministic: bool | None = None
    checkpoint: Checkpoint | None = None
    network: bool = False
    ports: list[Port] = field(default_factory=list)
    readiness: Readiness | None = None
    replicas: int = 0
    budget: int = 0
    openai: OpenAI | None = None
    public: bool = False
    _pos: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_service(self) -> bool:
        return self.kind == "service"

    def is_deterministic(self) -> bool:
        if self.deterministic is not None:
            return self.deterministic
        return self.executor == "wasm"

    def local_module(self) -> str | None:
        return _local(self.module)

    def ledger_spec(self, module: str) -> dict:
        """The on-chain job spec (ledger.JobSpec) as JSON fields in Go's
        order; module is the blob of the sealed module."""
        r = self.resources
        urls, inputs = [], []
        for i in self.inputs:
            if is_url(i.from_):
                urls.append(struct(("path", i.path, False), ("url", i.from_, False),
                                   ("sha256", _url_hash(i.sha256), False), ("size", i.size, True)))
            else:
                inputs.append(i.path)
        ckpt = None
        if self.checkpoint is not None:
            ckpt = struct(("path", self.checkpoint.path, False),
                          ("interval_seconds", self.checkpoint.interval // SECOND, False))
        return struct(
            ("name", self.name, False), ("executor", self.executor, False), ("module", module, True),
            ("image", self.image, True), ("command", list(self.command), True), ("args", list(self.args), True),
            ("env", Map(self.env), True), ("inputs", inputs, True), ("outputs", list(self.outputs), False),
            ("cpu_milli", math.ceil(r.cpu * 1000), False), ("memory", r.memory, False), ("disk", r.disk, False),
            ("gpu_count", r.gpu.count, False), ("gpu_models", list(r.gpu.models), True),
            ("min_vram", r.gpu.min_vram, True), ("min_compute_cap", r.gpu.min_compute_cap, True),
            ("max_price_per_hour", self.max_price, False), ("timeout_seconds", self.timeout // SECOND, False),
            ("verification", self.verification, False), ("deterministic", self.is_deterministic(), False),
            ("region", self.region, True), ("region_required", self.region_required, True),
            ("network", self.network, True), ("url_inputs", urls, True), ("checkpoint", ckpt, True),
            ("tier", "" if self.tier == "on-demand" else self.tier, True))

    def service_spec(self) -> dict:
        """The on-chain service spec (ledger.ServiceSpec) in Go's order."""
        r = self.resources
        rd = self.readiness or Readiness()
        sec = lambda d: max(0, d) // SECOND
        openai = None
        if self.openai is not None:
            openai = struct(("port", max(0, self.openai.port), False), ("models", list(self.openai.models), False))
        ports = [struct(("port", max(0, p.port), False), ("name", p.name, True), ("protocol", p.protocol, False))
                 for p in self.ports]
        return struct(
            ("name", self.name, False), ("image", self.image, False), ("command", list(self.command), True),
            ("args", list(self.args), True), ("env", Map(self.env), True),
            ("cpu_milli", math.ceil(r.cpu * 1000), False), ("memory", r.memory, False), ("disk", r.disk, False),
            ("gpu_count", max(0, r.gpu.count), False), ("gpu_models", list(r.gpu.models), True),
            ("min_vram", r.gpu.min_vram, True), ("min_compute_cap", r.gpu.min_compute_cap, True),
            ("max_price_per_hour", self.max_price, False), ("region", self.region, True),
            ("region_required", self.region_required, True), ("network", self.network, True),
            ("ports", ports or None, False),
            ("readiness", struct(("port", max(0, rd.port), False), ("path", rd.path, True),
                                 ("interval_seconds", sec(rd.interval), False),
                                 ("timeout_seconds", sec(rd.timeout), False),
                                 ("failure_threshold", max(0, rd.failure_threshold), False),
                                 ("start_seconds", sec(rd.start), False)), False),
            ("replicas", max(0, self.replicas), False), ("openai", openai, True))

    def quote_spec(self) -> dict:
        """The on-chain form a quote asks about (a placeholder module)."""
        return self.ledger_spec(PLACEHOLDER_MODULE if self.executor == "wasm" else "")


def is_url(s: str) -> bool:
    return s.startswith("https://") or s.startswith("http://")


def is_blob_ref(s: str) -> bool:
    return s.startswith("sha256:")


def _local(s: str) -> str | None:
    if not s or is_blob_ref(s) or is_url(s):
        return None
    return s


def _url_hash(s: str) -> str:
    t = s.strip().lower()
    if t.startswith("sha256:"):
        t = t[7:]
    return "sha256:" + t


# ---------------------------------------------------------------------------
# YAML: PyYAML's node tree, with scalars typed as goccy/go-yaml (YAML 1.2
# core schema) types them, not as PyYAML's YAML 1.1 does.

class _Loader(yaml.SafeLoader):
    def compose_scalar_node(self, anchor):
        ev = self.peek_event()
        node = super().compose_scalar_node(anchor)
        node.explicit = ev.tag if ev.tag not in (None, "!") else None
        return node

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            ev = self.peek_event()
            if ev.anchor not in self.anchors:
                raise _AliasError(ev.anchor, ev.start_mark)
        return super().compose_node(parent, index)


class _AliasError(Exception):
    def __init__(self, name, mark):
        self.name, self.mark = name, mark


_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*|0[0-9_]+)\Z|^0x[0-9a-fA-F_]+\Z|^0o[0-7_]+\Z|^0b[01_]+\Z")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"^[-+]?\.(inf|Inf|INF)\Z")
_NAN = re.compile(r"^\.(nan|NaN|NAN)\Z")


def _kind(n) -> str:
    """null, bool, int, float, str, map or seq."""
    if isinstance(n, yaml.MappingNode):
        return "map"
    if isinstance(n, yaml.SequenceNode):
        return "seq"
    if n.explicit is not None:
        return {"tag:yaml.org,2002:str": "str", "tag:yaml.org,2002:int": "int", "tag:yaml.org,2002:float": "float",
                "tag:yaml.org,2002:bool": "bool", "tag:yaml.org,2002:null": "null"}.get(n.explicit, "str")
    if n.style is not None:
        return "str"
    v = n.value
    if v in ("", "~", "null", "Null", "NULL"):
        return "null"
    if v in ("true", "True", "TRUE", "false", "False", "FALSE"):
        return "bool"
    if _INT.match(v):
        return "int"
    if _FLOAT.match(v) or _INF.match(v) or _NAN.match(v):
        return "float"
    return "str"


def _int_value(v: str) -> int | None:
    t = v.replace("_", "")
    try:
        if t.startswith(("0x", "0o", "0b")):
            return int(t, 0)
        return int(t, 10)
    except ValueError:
        return None


def _pos(n) -> tuple[int, int]:
    if n is None:
        return 0, 0
    if isinstance(n, yaml.MappingNode) and n.value:
        return _pos(n.value[0][0])
    return n.start_mark.line + 1, n.start_mark.column + 1


def _describe(n) -> str:
    k = "null" if n is None else _kind(n)
    if k == "null":
        return "empty (null)"
    if k == "map":
        return "a mapping"
    if k == "seq":
        return "a list"
    if k == "str":
        return f"the string {goq(clip(n.value))}"
    if k == "bool":
        return "the boolean " + n.value
    return "the number " + clip(n.value)


def _suggest(name: str, candidates: list[str]) -> str:
    def norm(s: str) -> str:
        return s.lower().replace("-", "_").replace(" ", "_")

    n = norm(name)
    best, best_d = "", 0
    for c in candidates:
        if norm(c) == n:
            return c
        limit = max(1, min(3, len(c) // 3))
        d = _distance(n, norm(c))
        if d <= limit and (best == "" or d < best_d):
            best, best_d = c, d
    return best


def _distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment) distance, as typo."""
    a, b = list(a), list(b)
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def _quote_list(names: list[str]) -> str:
    out = ""
    for i, n in enumerate(names):
        if i == 0:
            pass
        elif i == len(names) - 1:
            out += " or "
        else:
            out += ", "
        out += goq(n)
    return out


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def _env_field(field_: str, key: str) -> str:
    if _IDENT.match(key):
        return field_ + "." + key
    return field_ + "[" + goq(key) + "]"


class _Decoder:
    def __init__(self):
        self.errs: list[SpecProblem] = []
        self.moot: dict[int, str] = {}
        self.reported: set = set()
        self.pos: dict[str, tuple[int, int, bool]] = {}

    def error(self, field_: str, p: tuple[int, int], msg: str) -> SpecProblem:
        key = (field_, p[0], p[1], msg)
        for e in self.errs:
            if (e.field, e.line, e.column, e.message) == key:
                return e
        e = SpecProblem(msg, field_, p[0], p[1])
        self.errs.append(e)
        return e

    def type_error(self, field_: str, n, want: str, example: str) -> None:
        msg = f"must be {want}, not {_describe(n)}"
        if example:
            msg += "; e.g. " + example
        self.error(field_, _pos(n), msg)

    def mark(self, field_: str, key_pos: tuple[int, int], n) -> None:
        p = key_pos
        k = "null" if n is None else _kind(n)
        if k not in ("null", "map", "seq"):
            p = _pos(n)
        given = k != "null" and not (k == "str" and n.value == "")
        self.pos[field_] = (p[0], p[1], given)

    def mapping(self, field_: str, n, example: str, depth: int = 0) -> list[tuple[str, tuple[int, int], Any]]:
        if n is None or _kind(n) == "null":
            return []
        if not isinstance(n, yaml.MappingNode):
            self.type_error(field_, n, "a mapping", example)
            return []
        own, merged, seen_at = [], [], {}
        for kn, vn in n.value:
            if kn.tag == "tag:yaml.org,2002:merge" and getattr(kn, "style", None) is None and kn.value == "<<":
                if depth >= 16:
                    self.error(field_, _pos(kn), "merge keys (<<) nest more than 16 deep")
                    continue
                if isinstance(vn, yaml.SequenceNode):
                    for item in vn.value:
                        merged += self.mapping(field_, item, example, depth + 1)
                else:
                    merged += self.mapping(field_, vn, example, depth + 1)
                continue
            kp = _pos(kn)
            if not isinstance(kn, yaml.ScalarNode):
                self.error(field_, kp, f"a key must be a plain name, not {_describe(kn)}")
                continue
            key = kn.value
            if key in seen_at:
                raise _DupKey(key, seen_at[key], kp)
            seen_at[key] = kp
            own.append((key, kp, vn))
        seen = {k for k, _, _ in own}
        for e in merged:
            if e[0] not in seen:
                seen.add(e[0])
                own.append(e)
        return own

    def sequence(self, field_: str, n, example: str) -> list:
        if n is None or _kind(n) == "null":
            return []
        if isinstance(n, yaml.SequenceNode):
            return list(n.value)
        self.type_error(field_, n, "a list", example)
        return []

    def str(self, field_: str, n, example: str) -> str:
        k = "null" if n is None else _kind(n)
        if k == "null":
            return ""
        if k in ("map", "seq"):
            self.type_error(field_, n, "a string", example)
            return ""
        return n.value

    def str_list(self, field_: str, n, example: str) -> list[str]:
        out = []
        for i, item in enumerate(self.sequence(field_, n, example)):
            f = f"{field_}[{i}]"
            self.mark(f, _pos(item), item)
            if _kind(item) == "null":
                self.error(f, _pos(item), 'is empty (null); write "" for an empty string')
                continue
            out.append(self.str(f, item, ""))
        return out

    def str_map(self, field_: str, n, example: str) -> dict[str, str]:
        out = {}
        for key, kp, vn in self.mapping(field_, n, example):
            f = _env_field(field_, key)
            self.mark(f, kp, vn)
            out[key] = self.str(f, vn, "")
        return out

    def boolean(self, field_: str, n) -> bool | None:
        k = "null" if n is None else _kind(n)
        if k == "null":
            return None
        if k == "bool" and n.explicit is None:
            return n.value.lower() == "true"
        self.type_error(field_, n, "true or false", "")
        return None

    def integer(self, field_: str, n, example: str) -> int:
        k = "null" if n is None else _kind(n)
        if k == "null":
            return 0
        if k == "int" and n.explicit is None:
            v = _int_value(n.value)
            if v is not None and -(1 << 31) <= v <= (1 << 31) - 1:
                return v
            self.error(field_, _pos(n), f"{n.value} is far out of range")
            return 0
        if k == "float" and n.explicit is None:
            self.error(field_, _pos(n), f"must be a whole number, not {n.value}")
            return 0
        self.type_error(field_, n, "a whole number", example)
        return 0

    def number(self, field_: str, n, example: str) -> float:
        k = "null" if n is None else _kind(n)
        if n is not None and getattr(n, "explicit", None) == "tag:yaml.org,2002:str":
            k = "str"
        if k == "null":
            return 0.0
        if k == "int":
            v = _int_value(n.value)
            return float(v) if v is not None else 0.0
        if k == "float":
            t = n.value.replace("_", "")
            if _INF.match(t):
                return -math.inf if t.startswith("-") else math.inf
            if _NAN.match(t):
                return math.nan
            return float(t)
        self.type_error(field_, n, "a number", example)
        return 0.0

    def size(self, field_: str, n, example: str) -> int:
        k = "null" if n is None else _kind(n)
        if k == "null":
            return 0
        if k == "int":
            v = _int_value(n.value)
            if v is not None and v < 0:
                self.error(field_, _pos(n), f"{n.value} is negative; e.g. {example}")
                return 0
            if v is not None:
                return v
        if k == "float":
            self.error(field_, _pos(n), f"{n.value} needs a unit; e.g. {example} (a number alone is bytes)")
            return 0
        if k == "str":
            try:
                return parse_bytes(n.value)
            except ValueError as e:
                self.error(field_, _pos(n), str(e))
                return 0
        self.type_error(field_, n, "a size", example)
        return 0

    def _scalar_with(self, field_, n, parse, want, example):
        k = "null" if n is None else _kind(n)
        if k == "null":
            return 0
        if k in ("str", "int", "float"):
            try:
                return parse(n.value)
            except ValueError as e:
                self.error(field_, _pos(n), str(e))
                return 0
        self.type_error(field_, n, want, example)
        return 0

    def duration(self, field_: str, n) -> int:
        return self._scalar_with(field_, n, parse_duration, "a duration", "10m or 1h30m")

    def price(self, field_: str, n) -> int:
        return self._scalar_with(field_, n, parse_price, "a price in SYNC per hour", "0.5 or 500000usync")

    def amount(self, field_: str, n) -> int:
        return self._scalar_with(field_, n, parse_spec_amount, "an amount of SYNC", "5 SYNC or 5000000usync")

    def unknown(self, parent: str, key: str, kp, fields: list[str]) -> None:
        f = parent + "." + key if parent else key
        where = parent or "the spec"
        group = re.sub(r"\[\d+\]", "[]", parent)
        meant = _suggest(key, fields) or _ALIASES.get(group, {}).get(key.lower(), "")
        if not meant:
            self.error(f, kp, f"unknown field {goq(clip(key))} in {where}; the fields are {', '.join(fields)}")
            return
        full = parent + "." + meant if parent else meant
        e = self.error(f, kp, f"unknown field {goq(clip(key))} in {where}; did you mean {goq(meant)}?")
        self.moot[id(e)] = full

    def local_or_blob(self, field_: str, n, example: str) -> str:
        s = self.str(field_, n, example)
        if s == "~" or s.startswith("~/"):
            p = self.pos.get(field_, (0, 0, False))
            self.error(field_, (p[0], p[1]), f"{goq(clip(s))}: ~ is not expanded here; write the path relative to the spec's directory, or absolute")
        return s

    def spec(self, root) -> Spec | None:
        if not isinstance(root, yaml.MappingNode):
            self.error("", _pos(root), f"a spec is a mapping of fields (name: …, executor: …), not {_describe(root)}")
            return None
        s = Spec()
        entries = self.mapping("", root, "")
        fields = SPEC_FIELDS
        for key, kp, vn in entries:
            if key == "kind":
                self.mark(key, kp, vn)
                n0 = len(self.errs)
                s.kind = self.str(key, vn, "kind: service")
                if len(self.errs) > n0:
                    s.kind = _KIND_INVALID
                if s.kind == "service":
                    fields = SERVICE_FIELDS
        for key, kp, vn in entries:
            f = key
            self.mark(f, kp, vn)
            if key == "kind":
                pass
            elif key == "ports":
                s.ports = self.ports(f, vn)
            elif key == "readiness":
                s.readiness = self.readiness(f, vn)
            elif key == "replicas":
                s.replicas = self.integer(f, vn, "replicas: 2")
            elif key == "budget":
                s.budget = self.amount(f, vn)
            elif key == "openai":
                s.openai = self.openai(f, vn)
            elif key == "public":
                s.public = bool(self.boolean(f, vn))
            elif key == "name":
                s.name = self.str(f, vn, "name: wordcount")
            elif key == "executor":
                s.executor = self.str(f, vn, "executor: wasm")
            elif key == "module":
                s.module = self.local_or_blob(f, vn, "module: ./wc.wasm")
            elif key == "image":
                s.image = self.str(f, vn, "image: ghcr.io/org/app@sha256:…")
            elif key == "command":
                s.command = self.str_list(f, vn, 'command: ["python", "train.py"]')
            elif key == "args":
                s.args = self.str_list(f, vn, 'args: ["/in/input.txt"]')
            elif key == "env":
                s.env = self.str_map(f, vn, "env: {LANG: C}")
            elif key == "inputs":
                s.inputs = self.inputs(f, vn)
            elif key == "outputs":
                s.outputs = self.str_list(f, vn, "outputs: [/out]")
            elif key == "resources":
                s.resources = self.resources(f, vn)
            elif key == "max_price":
                s.max_price = self.price(f, vn)
            elif key == "timeout":
                s.timeout = self.duration(f, vn)
            elif key == "verification":
                s.verification = self.str(f, vn, "verification: spot")
            elif key == "region":
                s.region = self.str(f, vn, "region: eu")
            elif key == "region_required":
                s.region_required = bool(self.boolean(f, vn))
            elif key == "tier":
                s.tier = self.str(f, vn, "tier: on-demand")
            elif key == "deterministic":
                s.deterministic = self.boolean(f, vn)
            elif key == "checkpoint":
                s.checkpoint = self.checkpoint(f, vn)
            elif key == "network":
                s.network = bool(self.boolean(f, vn))
            else:
                self.pos.pop(f, None)
                self.unknown("", key, kp, fields)
        return s

    def inputs(self, field_: str, n) -> list[Input]:
        items = self.sequence(field_, n, "inputs: [{path: /in/data.csv, from: ./data.csv}]")
        out = [Input() for _ in items]
        for i, item in enumerate(items):
            f = f"{field_}[{i}]"
            self.mark(f, _pos(item), item)
            if _kind(item) == "null":
                self.error(f, _pos(item), "is empty; an input needs path and from, e.g. {path: /in/data.csv, from: ./data.csv}")
                continue
            for key, kp, vn in self.mapping(f, item, "{path: /in/data.csv, from: ./data.csv}"):
                ff = f + "." + key
                self.mark(ff, kp, vn)
                if key == "path":
                    out[i].path = self.str(ff, vn, "path: /in/data.csv")
                elif key == "from":
                    out[i].from_ = self.local_or_blob(ff, vn, "from: ./data.csv")
                elif key == "sha256":
                    out[i].sha256 = self.str(ff, vn, "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
                elif key == "size":
                    out[i].size = self.size(ff, vn, "size: 12MiB")
                else:
                    self.pos.pop(ff, None)
                    self.unknown(f, key, kp, _INPUT_FIELDS)
        return out

    def checkpoint(self, field_: str, n) -> Checkpoint | None:
        example = "checkpoint: {path: /ckpt, interval: 10m}"
        k = "null" if n is None else _kind(n)
        if k == "null":
            return None
        if k == "str":
            self.pos[field_ + ".path"] = self.pos.get(field_, (0, 0, False))
            return Checkpoint(path=self.str(field_, n, example))
        c = Checkpoint()
        for key, kp, vn in self.mapping(field_, n, example):
            f = field_ + "." + key
            self.mark(f, kp, vn)
            if key == "path":
                c.path = self.str(f, vn, "path: /ckpt")
            elif key == "interval":
                c.interval = self.duration(f, vn)
            else:
                self.pos.pop(f, None)
                self.unknown(field_, key, kp, _CKPT_FIELDS)
        return c

    def resources(self, field_: str, n) -> Resources:
        r = Resources()
        for key, kp, vn in self.mapping(field_, n, "resources: {cpu: 1, memory: 256MiB}"):
            f = field_ + "." + key
            self.mark(f, kp, vn)
            if key == "cpu":
                r.cpu = self.number(f, vn, "cpu: 2 or cpu: 0.5")
            elif key == "memory":
                r.memory = self.size(f, vn, "256MiB or 2GiB")
            elif key == "disk":
                r.disk = self.size(f, vn, "1GiB or 20GB")
            elif key == "gpu":
                r.gpu = self.gpu(f, vn)
            else:
                self.pos.pop(f, None)
                self.unknown(field_, key, kp, _RESOURCE_FIELDS)
        return r

    def gpu(self, field_: str, n) -> GPU:
        g = GPU()
        for key, kp, vn in self.mapping(field_, n, "gpu: {count: 1, models: [RTX_4090], min_vram: 24GiB}"):
            f = field_ + "." + key
            self.mark(f, kp, vn)
            if key == "count":
                g.count = self.integer(f, vn, "count: 1")
            elif key == "models":
                g.models = [normalize_gpu_model(m) for m in self.str_list(f, vn, "models: [RTX_4090, A100_80GB]")]
            elif key == "min_vram":
                g.min_vram = self.size(f, vn, "24GiB")
            elif key == "min_compute_cap":
                g.min_compute_cap = self.str(f, vn, 'min_compute_cap: "8.0"')
                if g.min_compute_cap and "." not in g.min_compute_cap and g.min_compute_cap.isdigit():
                    g.min_compute_cap += ".0"
            else:
                self.pos.pop(f, None)
                self.unknown(field_, key, kp, _GPU_FIELDS)
        return g

    def ports(self, field_: str, n) -> list[Port]:
        items = self.sequence(field_, n, "ports: [{port: 8000, name: api}]")
        out = [Port() for _ in items]
        for i, item in enumerate(items):
            f = f"{field_}[{i}]"
            self.mark(f, _pos(item), item)
            k = _kind(item)
            if k == "null":
                self.error(f, _pos(item), "is empty; a port needs its number, e.g. {port: 8000}")
                continue
            if k == "int":
                self.pos[f + ".port"] = self.pos[f]
                out[i].port = self.integer(f + ".port", item, "port: 8000")
                continue
            for key, kp, vn in self.mapping(f, item, "{port: 8000, name: api}"):
                ff = f + "." + key
                self.mark(ff, kp, vn)
                if key == "port":
                    out[i].port = self.integer(ff, vn, "port: 8000")
                elif key == "name":
                    out[i].name = self.str(ff, vn, "name: api")
                elif key == "protocol":
                    out[i].protocol = self.str(ff, vn, "protocol: http")
                else:
                    self.pos.pop(ff, None)
                    self.unknown(f, key, kp, _PORT_FIELDS)
        return out

    def readiness(self, field_: str, n) -> Readiness:
        r = Readiness()
        for key, kp, vn in self.mapping(field_, n, "readiness: {path: /health, port: 8000}"):
            f = field_ + "." + key
            self.mark(f, kp, vn)
            if key == "path":
                r.path = self.str(f, vn, "path: /health")
            elif key == "port":
                r.port = self.integer(f, vn, "port: 8000")
            elif key in ("interval", "timeout", "start"):
                setattr(r, key, self.duration(f, vn))
            elif key == "failure_threshold":
                r.failure_threshold = self.integer(f, vn, "failure_threshold: 3")
            else:
                self.pos.pop(f, None)
                self.unknown(field_, key, kp, _READY_FIELDS)
        return r

    def openai(self, field_: str, n) -> OpenAI | None:
        if n is None or _kind(n) == "null":
            return None
        o = OpenAI()
        for key, kp, vn in self.mapping(field_, n, "openai: {port: 8000, models: [tinylm]}"):
            f = field_ + "." + key
            self.mark(f, kp, vn)
            if key == "port":
                o.port = self.integer(f, vn, "port: 8000")
            elif key == "models":
                o.models = self.str_list(f, vn, "models: [tinylm]")
            else:
                self.pos.pop(f, None)
                self.unknown(field_, key, kp, _OPENAI_FIELDS)
        return o


class _DupKey(Exception):
    def __init__(self, key, first, at):
        self.key, self.first, self.at = key, first, at


def normalize_gpu_model(s: str) -> str:
    """A GPU class as the network spells it ("rtx 4090" → "RTX_4090")."""
    return s.strip().upper().replace(" ", "_").replace("-", "_")


def _sort(errs: list[SpecProblem]) -> list[SpecProblem]:
    errs = sorted(errs, key=lambda e: (e.line == 0, e.line, e.column))
    if len(errs) > 50:
        more = len(errs) - 50
        errs = errs[:50] + [SpecProblem("and 1 more problem" if more == 1 else f"and {more} more problems")]
    return errs


def _decode(data: bytes) -> tuple[Spec | None, _Decoder | None, list[SpecProblem]]:
    if len(data) > MAX_SPEC_SIZE:
        return None, None, [SpecProblem(f"the spec is larger than {format_bytes(MAX_SPEC_SIZE)}, the most allowed; put data in inputs")]
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    try:
        src = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, None, [SpecProblem("the spec is not valid UTF-8 text", "", data[:e.start].count(b"\n") + 1, 1)]
    try:
        docs = [d for d in yaml.compose_all(src, Loader=_Loader) if d is not None]
    except _AliasError as e:
        return None, None, [SpecProblem(f"alias *{e.name} refers to no anchor &{e.name} defined before it", "",
                                        e.mark.line + 1, e.mark.column + 1)]
    except yaml.MarkedYAMLError as e:
        m = e.problem_mark or e.context_mark
        msg = "invalid YAML: " + (e.problem or e.context or "syntax error")
        if "\t" in src and "tab" in msg.lower():
            msg += " (YAML indents with spaces, not tabs)"
        return None, None, [SpecProblem(msg, "", m.line + 1 if m else 0, m.column + 1 if m else 0)]
    except yaml.YAMLError as e:
        return None, None, [SpecProblem(f"invalid YAML: {e}")]
    except RecursionError:
        return None, None, [SpecProblem("lists and mappings are nested or indented too deeply")]
    if not docs:
        return None, None, [SpecProblem("the spec is empty; it needs at least name, executor, module or image, outputs, max_price and timeout")]
    if len(docs) > 1:
        l, c = _pos(docs[1])
        return None, None, [SpecProblem("a spec is one YAML document, but a second one starts here (after ---)", "", l, c)]
    d = _Decoder()
    try:
        s = d.spec(docs[0])
    except _DupKey as e:
        return None, None, [SpecProblem(f"{goq(e.key)} is given twice (first at line {e.first[0]}, column {e.first[1]})",
                                        "", e.at[0], e.at[1])]
    except RecursionError:
        return None, None, [SpecProblem("lists and mappings are nested or indented too deeply")]
    return s, d, d.errs


def _covers(d: _Decoder | None, errs: list[SpecProblem], field_: str) -> bool:
    def within(f: str, outer: str) -> bool:
        return outer != "" and (f == outer or f.startswith(outer + ".") or f.startswith(outer + "["))
    for e in errs:
        if within(field_, e.field) or (d is not None and within(field_, d.moot.get(id(e), ""))):
            return True
    return False


def parse_spec(data: str | bytes, base_dir: str = "") -> Spec:
    """Reads a spec from YAML, fills in defaults, joins relative local paths
    to base_dir and validates it, without touching files (load_spec checks
    them too). Raises SpecError listing every problem."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    s, d, errs = _decode(data)
    if s is None:
        raise SpecError(_sort(errs))
    s._pos = d.pos
    _set_defaults(s)
    s.module = _resolve(base_dir, s.module)
    for i in s.inputs:
        i.from_ = _resolve(base_dir, i.from_)
    errs = list(errs)
    for e in _Validator(s).run():
        if not _covers(d, errs, e.field):
            errs.append(e)
    if errs:
        raise SpecError(_sort(errs))
    return s


def load_spec(path: str | os.PathLike) -> Spec:
    """Reads the spec file at path (relative paths in it are relative to
    its directory), validates it and checks that the local files it names
    exist. Problems name the file."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SPEC_SIZE + 1)
    except OSError as e:
        raise SpecError([SpecProblem(f"read job spec: {e.strerror or e}", file=path)]) from None
    try:
        s = parse_spec(data, os.path.dirname(path))
        _check_files(s)
    except SpecError as e:
        for p in e.problems:
            p.file = path
        raise SpecError(e.problems) from None
    return s


def _resolve(base: str, p: str) -> str:
    if not p or is_blob_ref(p) or is_url(p) or not base or os.path.isabs(p):
        return p
    return os.path.normpath(os.path.join(base, p))


def _set_defaults(s: Spec) -> None:
    given = lambda f: s._pos.get(f, (0, 0, False))[2]
    if s.kind == "":
        s.kind = "batch"
    if s.kind == "service":
        if s.executor == "":
            s.executor = "oci"
        if s.replicas == 0 and not given("replicas"):
            s.replicas = 1
        for p in s.ports:
            if p.protocol == "":
                p.protocol = "http"
        first = s.ports[0].port if s.ports else 0
        if s.readiness is None:
            s.readiness = Readiness()
        r = s.readiness
        if r.port == 0 and not given("readiness.port"):
            r.port = first
        if r.interval == 0 and not given("readiness.interval"):
            r.interval = 5 * SECOND
        if r.timeout == 0 and not given("readiness.timeout"):
            r.timeout = 2 * SECOND
        if r.failure_threshold == 0 and not given("readiness.failure_threshold"):
            r.failure_threshold = 3
        if r.start == 0 and not given("readiness.start"):
            r.start = 300 * SECOND
        if s.openai is not None and s.openai.port == 0 and not given("openai.port"):
            s.openai.port = first
    elif s.kind != "batch":
        return
    if s.resources.cpu == 0 and not given("resources.cpu"):
        s.resources.cpu = 1.0
    if s.resources.memory == 0 and not given("resources.memory"):
        s.resources.memory = 256 * MiB
    if s.resources.disk == 0 and not given("resources.disk"):
        s.resources.disk = GiB
    if s.kind == "service":
        return
    if s.verification == "":
        s.verification = "spot"
    if s.tier == "":
        s.tier = "on-demand"
    if s.checkpoint is not None and s.checkpoint.interval == 0 and not given("checkpoint.interval"):
        s.checkpoint.interval = DEFAULT_CKPT
    if s.deterministic is None and s.executor in ("wasm", "oci"):
        s.deterministic = s.executor == "wasm"


def _check_files(s: Spec) -> None:
    errs = []

    def add(f, msg):
        p = _pos_of(s, f)
        errs.append(SpecProblem(msg, f, p[0], p[1]))

    path = s.local_module()
    if path:
        msg = _check_file(path, False)
        if msg:
            add("module", msg)
        else:
            try:
                with open(path, "rb") as f:
                    head = f.read(4)
            except OSError as e:
                add("module", f"cannot read {path}: {e.strerror}")
            else:
                if head != b"\x00asm":
                    add("module", f"{path} is not a WebAssembly binary (it does not start with \\0asm); compile it to .wasm first")
    for i, inp in enumerate(s.inputs):
        p = _local(inp.from_)
        if p:
            msg = _check_file(p, True)
            if msg:
                add(f"inputs[{i}].from", msg)
    if errs:
        raise SpecError(_sort(errs))


def _check_file(path: str, dir_ok: bool) -> str:
    import stat as st
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return f"{path} does not exist (relative paths are relative to the spec's directory)"
    except OSError as e:
        return f"cannot read {path}: {e.strerror}"
    if st.S_ISDIR(info.st_mode):
        if not dir_ok:
            return f"{path} is a directory; want a file"
    elif not st.S_ISREG(info.st_mode):
        kind = ("named pipe" if st.S_ISFIFO(info.st_mode) else "socket" if st.S_ISSOCK(info.st_mode)
                else "device" if (st.S_ISCHR(info.st_mode) or st.S_ISBLK(info.st_mode)) else "special file")
        return f"{path} is a {kind}; want {'a regular file or a directory' if dir_ok else 'a regular file'}"
    if not os.access(path, os.R_OK):
        return f"cannot read {path}: permission denied"
    return ""


def _pos_of(s: Spec, f: str) -> tuple[int, int]:
    while f:
        p = s._pos.get(f)
        if p and p[0] > 0:
            return p[0], p[1]
        i = max(f.rfind("."), f.rfind("["))
        if i < 0:
            break
        f = f[:i]
    return 0, 0


# ---------------------------------------------------------------------------
# Validation: the rules of internal/jobspec/validate.go and service.go.

def _guest_path_problem(p: str) -> str:
    if p == "":
        return "is empty; write an absolute path such as /out"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in p):
        return f"{goq(clip(p))} contains a control character"
    if len(p.encode()) > MAX_GUEST_PATH:
        return f"is {len(p.encode())} bytes long; at most {MAX_GUEST_PATH} are allowed"
    if not p.startswith("/"):
        msg = f"{goq(clip(p))} is not absolute: paths in the job's filesystem start with /"
        c = posixpath.normpath(p)
        if c != ".." and not c.startswith("../"):
            msg += f", e.g. {goq(clip('/' + c))}"
        return msg
    if ".." in p.split("/"):
        return f'{goq(clip(p))} contains ".."; write the path without it'
    if p == "/":
        return "cannot be / itself; use a directory such as /in or /out"
    c = _go_clean(p)
    if c != p:
        return f"{goq(clip(p))} is not in its simplest form; write {goq(clip(c))}"
    return ""


def _go_clean(p: str) -> str:
    c = posixpath.normpath(p)
    if c.startswith("//"):
        c = "/" + c.lstrip("/")
    return c


def _image_problem(ref: str) -> str:
    name, _, digest = ref.partition("@")
    has_digest = "@" in ref
    if len(name) > 255:
        return f"the name before @ is {len(name)} characters long; at most 255 are allowed"
    if not _IMAGE_NAME.match(name):
        return f"{goq(clip(ref))} is not an image reference: write registry/repository@sha256:<64 hex digits>, with the repository in lower case"
    hint = DIGEST_HINT.replace("REF", name)
    if not has_digest:
        bare = name
        i = name.rfind(":")
        if i > name.rfind("/"):
            bare = name[:i]
        return f"{goq(ref)} is not pinned by digest; write {bare}@sha256:<64 hex digits> so that every provider runs the same bytes ({hint})"
    if not _BLOB_REF.match(digest):
        return f"{goq(ref)} has a bad digest {goq(clip(digest))}: write sha256: followed by 64 lower-case hex digits ({hint})"
    return ""


_IP_CLASSES = [
    ("0.0.0.0/8", "unspecified"), ("10.0.0.0/8", "private"), ("100.64.0.0/10", "shared"),
    ("127.0.0.0/8", "loopback"), ("169.254.0.0/16", "link-local"), ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"), ("192.0.2.0/24", "reserved"), ("192.88.99.0/24", "reserved"),
    ("192.168.0.0/16", "private"), ("198.18.0.0/15", "reserved"), ("198.51.100.0/24", "reserved"),
    ("203.0.113.0/24", "reserved"), ("224.0.0.0/4", "multicast"), ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"), ("::1/128", "loopback"), ("64:ff9b:1::/48", "private"), ("100::/64", "reserved"),
    ("2001:db8::/32", "reserved"), ("2001::/23", "reserved"), ("3fff::/20", "reserved"), ("fc00::/7", "private"),
    ("fe80::/10", "link-local"), ("fec0::/10", "private"), ("ff00::/8", "multicast")]


def _classify(ip) -> str:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        elif ip in ipaddress.ip_network("64:ff9b::/96"):
            return _classify(ipaddress.IPv4Address(ip.packed[12:]))
        elif ip in ipaddress.ip_network("2002::/16"):
            return _classify(ipaddress.IPv4Address(ip.packed[2:6]))
    for net, cls in _IP_CLASSES:
        n = ipaddress.ip_network(net)
        if n.version == ip.version and ip in n:
            return cls
    if ip.version == 6 and ip not in ipaddress.ip_network("2000::/3"):
        return "reserved"
    return ""


def _ends_in_number(host: str) -> bool:
    host = host.rstrip(".") if host.endswith(".") else host
    last = host[host.rfind(".") + 1:]
    if not last:
        return False
    digits = "0123456789"
    if last.lower().startswith("0x"):
        last, digits = last[2:].lower(), "0123456789abcdef"
        if not last:
            return True
    return all(c in digits for c in last)


def _url_problem(s: str) -> str:
    """ledger checkHTTPURL with queries allowed."""
    if any(c in s for c in " \t\r\n\x00"):
        return "not a URL"
    try:
        u = urllib.parse.urlsplit(s)
        host = u.hostname
    except ValueError:
        return "not a URL"
    if u.scheme not in ("http", "https"):
        return f"scheme {goq(u.scheme)}: want http or https"
    if not u.netloc or not host:
        return "no host"
    if "@" in u.netloc:
        return "user information is not allowed"
    if "#" in s:
        return "a fragment is not allowed"
    return ""


class _Validator:
    def __init__(self, s: Spec):
        self.s = s
        self.errs: list[SpecProblem] = []

    def err(self, f: str, msg: str) -> None:
        p = _pos_of(self.s, f)
        self.errs.append(SpecProblem(msg, f, p[0], p[1]))

    def given(self, f: str) -> bool:
        return self.s._pos.get(f, (0, 0, False))[2]

    def run(self) -> list[SpecProblem]:
        s = self.s
        if s.kind == "service":
            self.service()
            return self.errs
        if s.kind not in ("", "batch"):
            kinds = ["batch", "service"]
            msg = f"{goq(clip(s.kind))} is not a kind; use {_quote_list(kinds)}"
            meant = _suggest(s.kind, kinds)
            if meant:
                msg += f" (did you mean {goq(meant)}?)"
            self.err("kind", msg)
            return self.errs
        for f in _SERVICE_ONLY:
            if self.given(f):
                self.err(f, f"is for services: add kind: service to run a long-running service, or remove {f}")
        self.name()
        self.program()
        self.env()
        self.inputs()
        self.outputs()
        self.resources()
        self.terms()
        return self.errs

    def name(self) -> None:
        n = self.s.name
        if n == "":
            self.err("name", "is required: a short name for the job, e.g. name: wordcount")
        elif not _JOB_NAME.match(n):
            msg = f"{goq(clip(n))} is not a valid name: use 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit"
            alt = re.sub(r"[^a-z0-9._-]+", "-", n.lower()).lstrip("._-")[:64]
            if alt and _JOB_NAME.match(alt):
                msg += f", e.g. {goq(alt)}"
            self.err("name", msg)

    def program(self) -> None:
        s = self.s
        if s.executor == "":
            self.err("executor", 'is required: "wasm" for a WebAssembly module or "oci" for a container image')
        elif s.executor == "wasm":
            if s.module == "":
                self.err("module", "is required for the wasm executor: a local .wasm file (e.g. ./wc.wasm) or an uploaded blob (sha256:…)")
            if s.image:
                self.err("image", "is for the oci executor; a wasm job runs its module (set executor: oci to run an image)")
            if s.command:
                self.err("command", "is for the oci executor; a wasm job runs its module's _start, so pass arguments in args")
        elif s.executor == "oci":
            if s.image == "":
                self.err("image", "is required for the oci executor: an image by digest, e.g. ghcr.io/org/app@sha256:<64 hex digits>")
            if s.module:
                self.err("module", "is for the wasm executor; an oci job runs its image (set executor: wasm to run a module)")
        else:
            msg = f'{goq(clip(s.executor))} is not an executor; use "wasm" or "oci"'
            meant = _suggest(s.executor, ["wasm", "oci"]) or _EXECUTOR_ALIASES.get(s.executor.lower(), "")
            if meant:
                msg += f" (did you mean {goq(meant)}?)"
            self.err("executor", msg)
        if s.module:
            self.local_or_blob("module", s.module)
        if s.image:
            m = _image_problem(s.image)
            if m:
                self.err("image", m)
        self.argv()

    def argv(self) -> None:
        s = self.s
        n = len(s.command) + len(s.args)
        if n > MAX_JOB_ITEMS:
            self.err("args", f"command and args have {n} entries together; at most {MAX_JOB_ITEMS} are allowed")
        for name, lst in (("command", s.command), ("args", s.args)):
            for i, a in enumerate(lst):
                if "\x00" in a:
                    self.err(f"{name}[{i}]", "contains a NUL byte, which a process argument cannot hold")

    def local_or_blob(self, f: str, p: str) -> None:
        if is_blob_ref(p):
            if not _BLOB_REF.match(p):
                self.err(f, f"{goq(clip(p))} is not a blob reference: write sha256: followed by 64 lower-case hex digits (or ./{clip(p)} for a local file of that name)")
        elif "\x00" in p:
            self.err(f, f"local path {goq(clip(p))} contains a NUL byte")
        elif len(p.encode()) > MAX_LOCAL_PATH:
            self.err(f, f"local path is {len(p.encode())} bytes long; at most {MAX_LOCAL_PATH} are allowed")

    def env(self) -> None:
        s = self.s
        if len(s.env) > MAX_JOB_ITEMS:
            self.err("env", f"has {len(s.env)} variables; at most {MAX_JOB_ITEMS} are allowed")
        for k in sorted(s.env, key=lambda x: x.encode("utf-8", "surrogatepass")):
            f = _env_field("env", k)
            if _ENV_KEY.match(k) and len(k) <= MAX_ENV_KEY:
                pass
            elif not _IDENT.match(k):
                self.err(f, f"{goq(clip(k))} is not a valid variable name: use letters, digits and _, not starting with a digit (e.g. LANG or MY_VAR)")
            else:
                self.err(f, f"the name is {len(k)} characters long; at most {MAX_ENV_KEY} are allowed")
            if "\x00" in s.env[k]:
                self.err(f, "the value contains a NUL byte, which an environment variable cannot hold")

    def conflicts(self, f, p, i, at, same, inside, contains) -> None:
        if i >= max(MAX_JOB_ITEMS, MAX_OUTPUTS):
            return
        for j in range(i):
            other = at(j)
            if p == other:
                self.err(f, same % (p, j))
            elif p.startswith(other + "/"):
                self.err(f, inside % (p, j, other))
            elif other.startswith(p + "/"):
                self.err(f, contains % (p, j, other))
            else:
                continue
            return

    def inputs(self) -> None:
        s = self.s
        if len(s.inputs) > MAX_JOB_ITEMS:
            self.err("inputs", f"has {len(s.inputs)} entries; at most {MAX_JOB_ITEMS} are allowed (upload a directory instead)")
        for i, inp in enumerate(s.inputs):
            f = f"inputs[{i}]"
            if inp.path == "":
                self.err(f + ".path", "is required: where the job sees the input, e.g. path: /in/data.csv")
            else:
                m = _guest_path_problem(inp.path)
                if m:
                    self.err(f + ".path", m)
                else:
                    self.conflicts(f + ".path", inp.path, i, lambda j: s.inputs[j].path,
                                   "%s is already the path of inputs[%d]; each input needs its own path",
                                   "%s is inside inputs[%d].path %s; inputs may not nest",
                                   "%s contains inputs[%d].path %s; inputs may not nest")
            if inp.from_ == "":
                self.err(f + ".from", "is required: a local file or directory (relative to the spec's directory), an uploaded blob (sha256:…) or an http(s) URL with its sha256")
            elif is_url(inp.from_):
                self.url_input(f, inp)
            else:
                self.local_or_blob(f + ".from", inp.from_)
                if inp.sha256 or inp.size:
                    self.err(f + ".sha256", "sha256 and size are for an input fetched from a URL; a local file or blob is checked by its upload")
        urls = [i for i in s.inputs if is_url(i.from_)]
        if len(urls) > MAX_URL_INPUTS:
            self.err("inputs", f"has {len(urls)} inputs from URLs; at most {MAX_URL_INPUTS} are allowed")
        total = sum(i.size for i in urls)
        if urls and total > s.resources.disk:
            self.err("inputs", f"the inputs from URLs declare {total} bytes in all, more than resources.disk ({s.resources.disk} bytes)")

    def url_input(self, f: str, inp: Input) -> None:
        if inp.sha256 == "":
            self.err(f + ".sha256", "is required with a URL: the SHA-256 of the content (64 hex digits, e.g. from sha256sum), which the provider checks")
        elif not _BLOB_REF.match(_url_hash(inp.sha256)):
            self.err(f + ".sha256", f"{goq(clip(inp.sha256))}: want 64 hex digits (sha256: may come first)")
        if len(inp.from_.encode()) > MAX_INPUT_URL:
            self.err(f + ".from", f"{len(inp.from_.encode())} bytes, at most {MAX_INPUT_URL}")
            return
        m = _url_problem(inp.from_)
        if m:
            self.err(f + ".from", f"{goq(inp.from_)}: {m}")
            return
        host = urllib.parse.urlsplit(inp.from_).hostname or ""
        try:
            ip = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            if _ends_in_number(host):
                self.err(f + ".from", f"host {goq(host)} is read as an IPv4 address in a nonstandard form: write an address as four decimal numbers (e.g. 192.0.2.10) or use a host name")
            return
        cls = _classify(ip)
        if cls:
            self.err(f + ".from", f"{host} is not a public address ({cls}): providers fetch URL inputs from public addresses only, never from their own networks")

    def outputs(self) -> None:
        s = self.s
        if not s.outputs:
            self.err("outputs", "at least one is required: a path in the job's filesystem collected after it ends, e.g. outputs: [/out]")
        if len(s.outputs) > MAX_OUTPUTS:
            self.err("outputs", f"has {len(s.outputs)} entries; at most {MAX_OUTPUTS} are allowed (collect a directory instead)")
        for i, out in enumerate(s.outputs):
            f = f"outputs[{i}]"
            m = _guest_path_problem(out)
            if m:
                self.err(f, m)
                continue
            self.conflicts(f, out, i, lambda j: s.outputs[j],
                           "%s is listed twice (also outputs[%d])",
                           "%s is inside outputs[%d] %s, which is collected already",
                           "%s contains outputs[%d] %s; collect only one of them")
        c = s.checkpoint
        if c is not None:
            m = _guest_path_problem(c.path)
            if c.path == "":
                self.err("checkpoint.path", "is required: the directory the job keeps its state in, e.g. checkpoint: {path: /ckpt, interval: 10m}")
            elif m:
                self.err("checkpoint.path", m)
            if c.interval < MIN_CKPT or c.interval > MAX_CKPT:
                self.err("checkpoint.interval", f"{format_duration(c.interval)} out of range [{format_duration(MIN_CKPT)}, {format_duration(MAX_CKPT)}] (the chain also refuses less than its checkpoint_min_interval, 60s by default)")
            elif c.interval % SECOND:
                self.err("checkpoint.interval", f"{format_duration(c.interval)}: want whole seconds")

    def size(self, f: str, b: int, lo: int, hi: int, example: str) -> None:
        if b == 0:
            self.err(f, f"must be more than 0, e.g. {example}")
        elif b < lo:
            self.err(f, f"{format_bytes(b)} is less than the minimum {format_bytes(lo)} (a number without a unit is bytes: write e.g. {example})")
        elif b > hi:
            self.err(f, f"{format_bytes(b)} is more than the maximum {format_bytes(hi)}")

    def resources(self) -> None:
        r = self.s.resources
        if math.isnan(r.cpu) or math.isinf(r.cpu):
            self.err("resources.cpu", "must be a number of cores, e.g. 1 or 0.5")
        elif r.cpu <= 0:
            self.err("resources.cpu", f"{_g(r.cpu)} cores: must be more than 0, e.g. 1 or 0.5")
        elif r.cpu > MAX_CPU:
            self.err("resources.cpu", f"{_g(r.cpu)} cores is more than the {MAX_CPU} a job may ask for")
        self.size("resources.memory", r.memory, MIN_MEMORY, MAX_MEMORY, "256MiB")
        self.size("resources.disk", r.disk, MIN_DISK, MAX_DISK, "1GiB")
        g = r.gpu
        if g.count < 0:
            self.err("resources.gpu.count", f"{g.count}: must not be negative (0 for no GPU)")
        elif g.count > MAX_GPUS:
            self.err("resources.gpu.count", f"{g.count} GPUs is more than the {MAX_GPUS} a job may ask for")
        if g.count == 0:
            asks = [n for n, v in (("models", g.models), ("min_vram", g.min_vram), ("min_compute_cap", g.min_compute_cap)) if v]
            if asks:
                self.err("resources.gpu.count", f"is 0, but {' and '.join(asks)} describe the GPU wanted: set count: 1 or more, or remove them")
        for i, m in enumerate(g.models):
            f = f"resources.gpu.models[{i}]"
            n = normalize_gpu_model(m)
            if m == "":
                self.err(f, "is empty; write a hardware class such as RTX_4090 or A100_80GB")
            elif n == "CPU":
                self.err(f, "cpu is not a GPU class; a CPU-only job sets gpu.count: 0")
            elif not _CLASS.match(n):
                self.err(f, f"{goq(clip(m))} is not a hardware class: use up to 32 letters, digits and _, e.g. RTX_4090 or A100_80GB (see gpunet offers)")
            elif n != m:
                self.err(f, f"{goq(clip(m))} is written {goq(clip(n))}")
            elif m in g.models[:i]:
                self.err(f, f"{m} is listed twice")
        if g.min_vram:
            self.size("resources.gpu.min_vram", g.min_vram, MIN_MEMORY, MAX_VRAM, "24GiB")
        if g.min_compute_cap and not _COMPUTE_CAP.match(g.min_compute_cap):
            self.err("resources.gpu.min_compute_cap", f'{goq(clip(g.min_compute_cap))} is not a compute capability: write major.minor, e.g. "8.0" or "8.6"')

    def one_of(self, f: str, value: str, values: list[str]) -> None:
        if value in values:
            return
        if value == "":
            self.err(f, f"is empty; use {_quote_list(values)}")
            return
        msg = f"{goq(clip(value))} is not one of {_quote_list(values)}"
        meant = _suggest(value, values)
        if meant:
            msg += f" (did you mean {goq(meant)}?)"
        self.err(f, msg)

    def price(self, service: bool) -> None:
        s = self.s
        if s.max_price == 0 and not self.given("max_price"):
            if service:
                self.err("max_price", "is required: the most one replica may cost, in SYNC per hour, e.g. max_price: 1 SYNC/h")
            else:
                self.err("max_price", "is required: the most the job may cost, in SYNC per hour for the whole job, e.g. max_price: 0.5")
        elif s.max_price == 0:
            self.err("max_price", "must be more than 0 SYNC per hour, e.g. 1 or 1000000usync" if service
                     else "must be more than 0 SYNC per hour, e.g. 0.5 or 500000usync")
        elif s.max_price > MAX_PRICE_LIMIT:
            self.err("max_price", f"{_sync(s.max_price)} SYNC/h is more than the maximum {_sync(MAX_PRICE_LIMIT)} SYNC/h")

    def terms(self) -> None:
        s = self.s
        self.price(False)
        if s.timeout == 0 and not self.given("timeout"):
            self.err("timeout", "is required: how long the job may run, e.g. timeout: 10m")
        elif s.timeout < MIN_TIMEOUT:
            self.err("timeout", f"{format_duration(s.timeout)} is shorter than the minimum {format_duration(MIN_TIMEOUT)}")
        elif s.timeout > MAX_TIMEOUT:
            self.err("timeout", f"{format_duration(s.timeout)} is longer than the maximum {format_duration(MAX_TIMEOUT)} (168h); split the work, and use checkpoint to resume")
        self.one_of("verification", s.verification, ["none", "spot", "full"])
        self.one_of("tier", s.tier, ["spot", "on-demand", "priority"])
        if s.verification == "full" and not s.is_deterministic():
            full = "full needs a deterministic job, because replicas' outputs are compared by hash"
            if self.given("deterministic"):
                self.err("verification", f"{full}, but this one says deterministic: false; use verification: spot or none")
            else:
                self.err("verification", f"{full}, and an oci job is not deterministic unless it says so: add deterministic: true if the same inputs always give byte-identical outputs, or use verification: spot or none")
        self.region()
        if s.network and s.executor == "wasm":
            self.err("network", "is true, but wasm jobs have no network: use executor: oci, or remove network")

    def region(self) -> None:
        s = self.s
        if s.region and not _REGION.match(s.region):
            msg = f"{goq(clip(s.region))} is not a region: use up to 32 lower-case letters, digits and '-', e.g. eu or us-east"
            if _REGION.match(s.region.lower()):
                msg += f" (write {goq(s.region.lower())})"
            self.err("region", msg)
        if s.region_required and not s.region:
            self.err("region_required", "is true, but no region is given: set region (e.g. region: eu) or remove region_required")

    # Services.

    def service(self) -> None:
        s = self.s
        self.name()
        for f, why in _BATCH_ONLY:
            if self.given(f):
                self.err(f, f"is not for a service: {why}")
        if s.executor == "wasm":
            self.err("executor", "a service runs as an oci container; wasm is for batch jobs (remove executor, or write executor: oci)")
        elif s.executor != "oci":
            self.err("executor", f'{goq(clip(s.executor))} is not an executor for a service: services run only as "oci" containers (the default)')
        if s.image == "":
            self.err("image", "is required for a service: an image by digest, e.g. ghcr.io/org/app@sha256:<64 hex digits>")
        else:
            m = _image_problem(s.image)
            if m:
                self.err("image", m)
        self.argv()
        self.env()
        self.resources()
        self.ports()
        self.readiness()
        self.openai()
        if s.replicas < 1 or s.replicas > MAX_REPLICAS:
            self.err("replicas", f"{s.replicas} out of range [1, {MAX_REPLICAS}]")
        self.price(True)
        if s.budget == 0 and not self.given("budget"):
            self.err("budget", "is required: the SYNC locked to pay the replicas, e.g. budget: 5 SYNC (top it up later with gpunet service topup)")
        elif s.budget == 0:
            self.err("budget", "must be more than 0, e.g. 5 SYNC")
        elif s.budget > MAX_BUDGET:
            self.err("budget", f"{_sync(s.budget)} SYNC is more than the maximum {_sync(MAX_BUDGET)} SYNC")
        self.region()

    def declared(self, port: int) -> Port | None:
        for p in self.s.ports:
            if p.port == port:
                return p
        return None

    def ports(self) -> None:
        s = self.s
        if not s.ports:
            self.err("ports", "at least one is required: the ports the container listens on, e.g. ports: [{port: 8000, name: api}]")
        elif len(s.ports) > MAX_PORTS:
            self.err("ports", f"has {len(s.ports)} entries; at most {MAX_PORTS} are allowed")
        for i, p in enumerate(s.ports):
            f = f"ports[{i}]"
            if p.port < 1 or p.port > 65535:
                self.err(f + ".port", f"{p.port} is not a port: use 1 to 65535")
            elif any(q.port == p.port for q in s.ports[:i]):
                self.err(f + ".port", f"{p.port} is listed twice")
            if not _PORT_NAME.match(p.name):
                self.err(f + ".name", f"{goq(clip(p.name))} is not a port name: use up to 15 lower-case letters, digits and '-', e.g. api")
            elif p.name and any(q.name == p.name for q in s.ports[:i]):
                self.err(f + ".name", f"{goq(p.name)} is the name of another port too")
            self.one_of(f + ".protocol", p.protocol, ["http", "tcp"])

    def whole_seconds(self, f: str, d: int, lo: int, hi: int) -> bool:
        if d < lo or d > hi:
            self.err(f, f"{format_duration(d)} out of range [{format_duration(lo)}, {format_duration(hi)}]")
        elif d % SECOND:
            self.err(f, f"{format_duration(d)}: want whole seconds")
        else:
            return True
        return False

    def readiness(self) -> None:
        s = self.s
        r = s.readiness
        if r is None:
            self.err("readiness", "is missing; SetDefaults fills it in")
            return
        ports = ", ".join(str(p.port) for p in s.ports)
        if s.ports and self.declared(r.port) is None:
            self.err("readiness.port", f"{r.port} is not one of the ports; check one of {ports}")
        p = r.path
        if p:
            if not p.startswith("/"):
                self.err("readiness.path", f"{goq(clip(p))} is not a path: start it with /, e.g. /health")
            elif len(p.encode()) > MAX_READY_PATH:
                self.err("readiness.path", f"is {len(p.encode())} bytes long; at most {MAX_READY_PATH} are allowed")
            elif any(c <= " " or c == "\x7f" or c.isspace() for c in p):
                self.err("readiness.path", f"{goq(clip(p))} contains a space or control character; escape it as in a URL (%20)")
            elif "?" in p or "#" in p:
                self.err("readiness.path", f"{goq(clip(p))} has a query or fragment; write the path alone, e.g. /health")
            dp = self.declared(r.port)
            if dp is not None and dp.protocol == "tcp":
                self.err("readiness.path", f"is an HTTP path, but port {r.port} is tcp: remove path to check with a TCP connect, or make the port http")
        ok = self.whole_seconds("readiness.interval", r.interval, MIN_READY, MAX_READY)
        if self.whole_seconds("readiness.timeout", r.timeout, MIN_READY, MAX_READY) and ok and r.timeout > r.interval:
            self.err("readiness.timeout", f"{format_duration(r.timeout)} is longer than the interval {format_duration(r.interval)}: a check must end before the next one")
        if r.failure_threshold < 1 or r.failure_threshold > MAX_FAILURES:
            self.err("readiness.failure_threshold", f"{r.failure_threshold} out of range [1, {MAX_FAILURES}]: how many failed checks in a row end a replica")
        self.whole_seconds("readiness.start", r.start, MIN_READY, MAX_READY_START)

    def openai(self) -> None:
        s = self.s
        o = s.openai
        if o is None:
            return
        p = self.declared(o.port)
        ports = ", ".join(str(x.port) for x in s.ports)
        if s.ports and p is None:
            self.err("openai.port", f"{o.port} is not one of the ports; use one of {ports}")
        elif p is not None and p.protocol != "http":
            self.err("openai.port", f"port {o.port} is tcp; OpenAI's API is HTTP, so it needs an http port")
        if not o.models:
            self.err("openai.models", "at least one is required: the model names clients ask for, e.g. models: [tinylm]")
        elif len(o.models) > MAX_MODELS:
            self.err("openai.models", f"has {len(o.models)} entries; at most {MAX_MODELS} are allowed")
        for i, m in enumerate(o.models):
            f = f"openai.models[{i}]"
            if m == "":
                self.err(f, "is empty; write the model's name, e.g. tinylm")
            elif len(m.encode()) > MAX_MODEL_NAME:
                self.err(f, f"is {len(m.encode())} bytes long; at most {MAX_MODEL_NAME} are allowed")
            elif not _MODEL_NAME.match(m):
                self.err(f, f"{goq(clip(m))} is not a model name: use letters, digits and . _ : / -, e.g. llama-3-8b or org/model:q4")
            elif m in o.models[:i]:
                self.err(f, f"{m} is listed twice")


def _g(x: float) -> str:
    """Go's %g for the values a cpu count takes."""
    s = repr(x)
    if s.endswith(".0"):
        s = s[:-2]
    if "e" in s:
        m, e = s.split("e")
        s = f"{m}e{'+' if not e.startswith('-') else '-'}{abs(int(e)):02d}"
    return s


def _sync(u: int) -> str:
    return format_sync(u)[: -len(" SYNC")]
