"""How bringup's HTTP clients hold their connections to the server: never one the server is about to close.

The released servers run uvicorn, which closes a connection idle for `timeout_keep_alive` seconds, without a word
and without logging it: SGLang sets it from `SGLANG_TIMEOUT_KEEP_ALIVE` (`EnvInt(5)`, sglang 0.5.23
`srt/environ.py`, passed in every `uvicorn.Config` of `srt/entrypoints/http_server.py`), vLLM from
`VLLM_HTTP_TIMEOUT_KEEP_ALIVE` (`"5"` by default, `vllm/envs.py`). httpx also retires an idle connection after 5 s
by default: a request sent at about 5 s of idleness can leave on a connection whose close is already on its way
back, and fails with "the server disconnected" although the server is fine (vLLM's own benchmark client retires
its connections at half the server's time for this reason). A probe that fails for that reads as a server that
does not answer; a sweep's request that fails for it is a failed request in a cell. Every client of bringup's that
talks to the server takes its limits from here.
"""

from __future__ import annotations

import httpx

#: the released servers' idle-connection timeout (uvicorn's `timeout_keep_alive`; see above)
SERVER_IDLE_CLOSE_S = 5.0
#: an idle connection is retired this soon: half the server's time, well clear of it even over an SSH forward,
#: and still longer than the foreground's 2 s between scrapes and probes, which keep using one connection
IDLE_S = SERVER_IDLE_CLOSE_S / 2


def limits(connections: int | None = None) -> httpx.Limits:
    """httpx's limits for a client of the server: `connections` at most (httpx's default when None), each retired
    after `IDLE_S` idle."""
    if connections is None:
        return httpx.Limits(keepalive_expiry=IDLE_S)
    return httpx.Limits(max_connections=connections, max_keepalive_connections=connections,
                        keepalive_expiry=IDLE_S)
