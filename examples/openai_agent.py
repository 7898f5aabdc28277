#!/usr/bin/env python
"""A small agent loop on the official ``openai`` SDK that uses agentkb as its knowledge tool.

It takes the tool definition from ``GET /api/tools/lookup_knowledge/schema`` and the system prompt
from ``GET /api/prompts/executor``, then lets the model call ``lookup_knowledge`` (answered by
``POST /api/tools/lookup_knowledge``) until it answers. Any OpenAI-compatible endpoint works.

    export AGENTKB_URL=http://127.0.0.1:8000 AGENTKB_TOKEN=<tool token>
    export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini
    python examples/openai_agent.py "数据库连接池怎么配置？"

The loop stops a model that keeps looking things up: one session id for the whole run (so
agentkb withholds documents it already returned), and once a round of lookups brings nothing new
(relevanceLevel DEDUPED, or nothing found) the model is asked once more, with tools off, to answer
from what it has. ``--max-turns`` caps the whole run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from dataclasses import dataclass, field

import httpx
from openai import OpenAI

NOTHING_NEW = "agentkb returned nothing new; answer now from what you have, and say what is missing."


@dataclass
class AgentRun:
    answer: str
    session_id: str
    lookups: list[dict] = field(default_factory=list)  # each lookup_knowledge body, in order

    @property
    def fetched_doc_keys(self) -> list[str]:
        """Every document agentkb handed over, in order (a repeat would appear twice)."""
        keys = []
        for body in self.lookups:
            for item in ([body["primary"]] if body.get("primary") else []) + body.get("supplement", []):
                keys.append(item["docKey"])
        return keys


class AgentKB:
    """The three agentkb endpoints the loop needs."""

    def __init__(self, base_url: str, token: str):
        self.http = httpx.Client(
            base_url=base_url.rstrip("/"), headers={"Authorization": f"Token {token}"}, timeout=60
        )

    def tool_definition(self) -> dict:
        return self._ok(self.http.get("/api/tools/lookup_knowledge/schema")).json()

    def executor_prompt(self) -> str:
        return self._ok(self.http.get("/api/prompts/executor")).text

    def lookup(self, *, arguments: dict, session_id: str) -> dict:
        # The model's arguments (query, and the optional domains / metadata_condition / top_k) as
        # it wrote them; the session in the header, set by this loop, never by the model.
        response = self.http.post(
            "/api/tools/lookup_knowledge", json=arguments, headers={"X-Session-Id": session_id}
        )
        if response.status_code == 400:  # bad arguments from the model: tell it, it may correct them
            return {"error": response.json()["error"]["message"]}
        return self._ok(response).json()

    @staticmethod
    def _ok(response: httpx.Response) -> httpx.Response:
        response.raise_for_status()
        return response


def run_agent(
    question: str, *, kb: AgentKB, llm: OpenAI, model: str, max_turns: int = 8, log=None
) -> AgentRun:
    tool = kb.tool_definition()
    tool_name = tool["function"]["name"]
    run = AgentRun(answer="", session_id=f"example-{uuid.uuid4().hex}")
    messages: list[dict] = [
        {"role": "system", "content": kb.executor_prompt()},
        {"role": "user", "content": question},
    ]
    tools_on = True
    for _ in range(max_turns):
        extra = {"tools": [tool]} if tools_on else {}
        reply = llm.chat.completions.create(model=model, messages=messages, **extra).choices[0].message
        if not tools_on or not reply.tool_calls:
            run.answer = reply.content or ""
            return run
        messages.append(reply.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
        something_new = False
        for call in reply.tool_calls:
            if call.function.name != tool_name:
                result = {"error": f"unknown tool {call.function.name}"}
            else:
                try:
                    arguments = json.loads(call.function.arguments or "{}")
                except ValueError:
                    arguments = {}
                # The session is the loop's (a header): it is the action memory. The model's schema
                # has no session_id, so it cannot invent one.
                if not isinstance(arguments, dict):
                    arguments = {}
                arguments.pop("session_id", None)  # an older schema's model may still write one
                result = kb.lookup(arguments=arguments, session_id=run.session_id)
                if "error" not in result:
                    run.lookups.append(result)
                    something_new |= result["found"]
                    if log:
                        primary = (result.get("primary") or {}).get("docKey")
                        log(f"lookup {arguments.get('query')!r}: {result['relevanceLevel']} {primary or ''}")
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result, ensure_ascii=False)}
            )
        if not something_new:
            # Nothing new came back: more lookups would only repeat themselves (seed 000).
            messages.append({"role": "user", "content": NOTHING_NEW})
            tools_on = False
    run.answer = run.answer or "(stopped after --max-turns without an answer)"
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question")
    parser.add_argument("--agentkb-url", default=os.environ.get("AGENTKB_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--agentkb-token", default=os.environ.get("AGENTKB_TOKEN"))
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    parser.add_argument("--max-turns", type=int, default=8)
    args = parser.parse_args(argv)
    if not args.agentkb_token:
        parser.error("--agentkb-token (or AGENTKB_TOKEN) is required: python manage.py issue_tool_token NAME")

    # OPENAI_BASE_URL and OPENAI_API_KEY are read by the SDK itself.
    llm = OpenAI()
    run = run_agent(
        args.question,
        kb=AgentKB(args.agentkb_url, args.agentkb_token),
        llm=llm,
        model=args.model,
        max_turns=args.max_turns,
        log=lambda line: print(line, file=sys.stderr),
    )
    print(run.answer)
    print(
        json.dumps(
            {"session_id": run.session_id, "lookups": len(run.lookups), "documents": run.fetched_doc_keys},
            ensure_ascii=False,
        ),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
