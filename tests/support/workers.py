"""Which worker process of a pre-fork web server (gunicorn) served a response.

A gunicorn worker accepts a connection and serves every request on it, so the worker that
served a response is the process holding the server's end of the response's TCP connection.
The kernel says which (``/proc/net/tcp`` names the socket, ``/proc/<pid>/fd`` who holds it):
the server under test runs unchanged, with no header or log line added for the test. Linux,
IPv4 loopback.

``client_on`` opens connections until the kernel hands one to the wanted worker (a request
without a token, refused with 401 before it spends anything, finds out which), so a test can
send its next request to a worker of its choosing.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx

_ESTABLISHED = "01"


def worker_pids(master: int) -> list[int]:
    """The processes whose parent is ``master`` (gunicorn's arbiter): its workers."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked
            continue
        # The command name (in parentheses) may hold spaces; the parent id follows the state.
        if int(stat.rsplit(")", 1)[1].split()[1]) == master:
            children.append(int(entry.name))
    return sorted(children)


def _server_socket_inode(server_port: int, client_port: int) -> str | None:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
        if local_port == server_port and remote_port == client_port and fields[3] == _ESTABLISHED:
            return fields[9]
    return None


def served_by(response: httpx.Response, workers: list[int]) -> int | None:
    """The worker (one of ``workers``) holding the server's end of the connection ``response``
    came over; None when no worker holds it any more (the server closed it)."""
    stream = response.extensions["network_stream"]
    client_port = stream.get_extra_info("client_addr")[1]
    inode = _server_socket_inode(response.url.port, client_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for pid in workers:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    return pid
            except OSError:  # closed while we looked
                continue
    return None


def client_on(base_url: str, worker: int, workers: list[int], *, tries: int = 200) -> httpx.Client:
    """An HTTP client whose open connection is served by ``worker``; the caller closes it.
    Its next request goes over that connection (send it at once: an idle connection is closed
    after gunicorn's keep-alive, 2 s by default)."""
    for _ in range(tries):
        client = httpx.Client(base_url=base_url, timeout=60)
        probe = client.get("/mcp/")  # no token: 401, nothing spent
        if served_by(probe, workers) == worker:
            return client
        client.close()
    raise AssertionError(f"no connection reached worker {worker} in {tries} tries")
