"""An asyncio face of Client: the same methods as coroutines, each run in a
worker thread (asyncio.to_thread), and logs as an async iterator. It adds
no behaviour of its own; the blocking Client does the work."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator

from .client import Client

_SYNC = ("status", "balance", "account", "send", "offers", "provider", "quote", "job", "jobs", "submit", "wait",
         "outputs", "cancel", "run", "key")
_SERVICES = ("deploy", "status", "stop", "key", "quote", "scale", "top_up")


class _AsyncServices:
    def __init__(self, s):
        self._s = s

    def __getattr__(self, name: str):
        if name not in _SERVICES:
            raise AttributeError(name)
        fn = getattr(self._s, name)

        @functools.wraps(fn)
        async def call(*a, **kw):
            return await asyncio.to_thread(fn, *a, **kw)
        return call


class AsyncClient:
    """Client's operations as coroutines: ``await c.submit(...)``,
    ``async for chunk in c.logs(id)``. Takes Client's arguments."""

    def __init__(self, *args: Any, **kw: Any):
        self.sync = Client(*args, **kw)
        self.services = _AsyncServices(self.sync.services)

    def __getattr__(self, name: str):
        if name not in _SYNC:
            raise AttributeError(name)
        fn = getattr(self.sync, name)

        @functools.wraps(fn)
        async def call(*a, **kw):
            return await asyncio.to_thread(fn, *a, **kw)
        return call

    async def logs(self, *args: Any, **kw: Any) -> AsyncIterator[bytes]:
        it = self.sync.logs(*args, **kw)
        done = object()
        while True:
            chunk = await asyncio.to_thread(next, it, done)
            if chunk is done:
                return
            yield chunk
