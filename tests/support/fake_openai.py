"""A real local HTTP server speaking the OpenAI chat-completions protocol, for tests.

No LLM can run here, so tests point the official ``openai`` client (through ``LLM_BASE_URL``,
or directly) at this server. It listens on 127.0.0.1 on a free port, in a thread of the test
process, and answers ``POST /v1/chat/completions`` (plain or ``stream: true``) and
``GET /v1/models``.

Scripting: replies queued with ``push()`` are used first, in order; then ``responder`` (a
callable given the request body) answers, and without one a fixed ``{}`` JSON object does.
A reply is a ``Reply``, a string (the assistant's content), a dict (sent as JSON content) or a
callable of the request body returning one of those. Every request is kept in ``requests``
(body, path, headers), so a test counts calls and inspects the messages sent.

    with FakeOpenAI() as llm:
        llm.push(Reply(status=500), {"covers": ["x"], "when_to_retrieve": "y"})
        client = openai.OpenAI(base_url=llm.base_url, api_key="k")
        ...
        assert llm.call_count == 2

Tool calls (for agent loops): ``Reply(tool_calls=[tool_call("lookup_knowledge", {"query": "..."})])``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``status`` >= 400 sends an OpenAI-style error (or ``body``)."""

    content: str | None = None
    tool_calls: list[dict] | None = None
    status: int = 200
    body: Any = None  # sent as is instead of a chat completion (dict/list -> JSON, str/bytes raw)
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    finish_reason: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any

    @property
    def messages(self) -> list[dict]:
        return (self.body or {}).get("messages", []) if isinstance(self.body, dict) else []


def tool_call(name: str, arguments: dict, call_id: str | None = None) -> dict:
    """A tool call as the chat-completions API returns it."""
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


ReplyLike = Reply | str | dict | Callable[[dict], Any]


class FakeOpenAI:
    def __init__(
        self, *, responder: Callable[[dict], Any] | None = None, api_key: str | None = None, port: int = 0
    ):
        self.responder = responder
        self.bind_port = port  # 0: any free port
        self.api_key = api_key  # when set, other keys get 401 like the real API
        self.requests: list[RecordedRequest] = []
        self._queue: deque[ReplyLike] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(_Handler):
            owner = fake

        server = _Server(("127.0.0.1", self.bind_port), Handler)
        server.daemon_threads = True
        server.block_on_close = False  # a handler sleeping in a `delay` must not hold up stop()
        self._server = server
        # A short poll interval makes stop() quick (serve_forever checks for shutdown this often).
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """What to give the client as base_url (LLM_BASE_URL)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- scripting and inspection ------------------------------------------------------------
    def push(self, *replies: ReplyLike) -> None:
        with self._lock:
            self._queue.extend(replies)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def call_count(self) -> int:
        """Chat-completion requests received (each retry counts)."""
        return len(self.chat_requests())

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._queue.clear()

    def wait_for_calls(self, count: int, *, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.call_count < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} LLM calls, got {self.call_count} after {timeout}s")
            time.sleep(0.02)

    # --- internals ---------------------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is None:
            scripted = self.responder if self.responder is not None else {}
        return _as_reply(scripted, body)


def _as_reply(value: Any, body: dict) -> Reply:
    if callable(value) and not isinstance(value, Reply):
        value = value(body)
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(content=value)
    if isinstance(value, dict | list):
        return Reply(content=json.dumps(value, ensure_ascii=False))
    raise TypeError(f"cannot turn {type(value).__name__} into a reply")


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # A client that gave up (a timeout test) closes the socket before the delayed answer.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        if isinstance(payload, bytes | str):
            data = payload.encode() if isinstance(payload, str) else payload
            content_type = "text/plain"
        else:
            data = json.dumps(payload, ensure_ascii=False).encode()
            content_type = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        if self.owner.api_key is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {self.owner.api_key}":
            return True
        self._send_json(
            401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        )
        return False

    def do_GET(self) -> None:
        self.owner._record(RecordedRequest("GET", self.path, _lower(self.headers), None))
        if not self._authorised():
            return
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(
                200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}]}
            )
        else:
            self._send_json(404, _error(f"no route {self.path}", "invalid_request_error"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = raw.decode(errors="replace")
        self.owner._record(RecordedRequest("POST", self.path, _lower(self.headers), body))
        if not self._authorised():
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, _error(f"no route {self.path}", "invalid_request_error"))
            return
        if not isinstance(body, dict) or "messages" not in body or "model" not in body:
            self._send_json(400, _error("'messages' and 'model' are required", "invalid_request_error"))
            return

        reply = self.owner._next_reply(body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.body is not None:
            self._send_json(reply.status, reply.body, reply.headers)
            return
        if reply.status >= 400:
            self._send_json(
                reply.status, _error(f"scripted error {reply.status}", "server_error"), reply.headers
            )
            return
        if body.get("stream"):
            self._stream(body, reply)
        else:
            self._send_json(200, _completion(body, reply), reply.headers)

    def _stream(self, body: dict, reply: Reply) -> None:
        completion = _completion(body, reply)
        message = completion["choices"][0]["message"]
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        chunks = [
            {
                **completion,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            },
            {
                **completion,
                "object": "chat.completion.chunk",
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": completion["choices"][0]["finish_reason"]}
                ],
            },
        ]
        for chunk in chunks:
            chunk.pop("usage", None)
        data = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        encoded = data.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(encoded)))
        self.end_headers()
        self.wfile.write(encoded)


def _completion(body: dict, reply: Reply) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _error(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _lower(headers) -> dict[str, str]:
    # HTTP header names are case-insensitive: recorded lower-case ("authorization").
    return {key.lower(): value for key, value in headers.items()}


def summaries_responder(body: dict) -> dict:
    """Answers the project's two summary prompts with JSON of their shape: a domain's guidance when
    the system prompt asks for a description, else a document's covers."""
    system = next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"), "")
    if '"description"' in system:
        return {"when_to_retrieve": "问题涉及本域内容时检索", "description": "本域文档"}
    return {"covers": ["文档内容"], "when_to_retrieve": "问到文档内容时检索"}


def main() -> None:
    """Serve in a process of its own (a benchmark stops it with SIGSTOP to hang it):
    ``python -m tests.support.fake_openai --port N``: answers the summary prompts."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    # Blocked before the server's threads start, so that only sigwait below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    server = FakeOpenAI(responder=summaries_responder, port=args.port).start()
    print(f"fake OpenAI endpoint at {server.base_url}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop()


if __name__ == "__main__":
    main()
