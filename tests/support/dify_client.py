"""Dify's client for an external knowledge API, as Dify's own code behaves (langgenius/dify, api/):

- the retrieval call (``ExternalDatasetService.fetch_external_knowledge_retrieval``): POST
  ``<endpoint>/retrieval`` with ``Content-Type: application/json`` and ``Authorization: Bearer
  <api_key>``, the body serialised with ``json.dumps`` (so non-ASCII text is escaped):
  ``retrieval_setting`` (``top_k``; ``score_threshold`` only when its switch is on, else 0.0),
  ``query``, ``knowledge_id``, and ``metadata_condition`` only when there is one, as its pydantic
  ``model_dump()``: ``conditions`` is null when none were set, and every condition carries
  ``name`` (a string), ``comparison_operator`` and ``value`` (null when left empty). Any answer but
  200 becomes an empty list of records;
- the connection check when the API is registered (``check_endpoint_and_api_key``): the same POST
  with the Bearer header and no body at all; 403, 404 and 502 fail it, anything else passes;
- every request goes through ``ssrf_proxy.make_request``: 429, 500, 502, 503 and 504 are retried
  (3 retries by default, sleeping 0.5 s * 2^n between them), after which it raises.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

RETRIED_STATUSES = (429, 500, 502, 503, 504)
DEFAULT_MAX_RETRIES = 3
BACKOFF_FACTOR = 0.5
CHECK_FAILURES = {502: "Bad Gateway", 404: "Not Found", 403: "Forbidden"}


class MaxRetriesReached(Exception):
    pass


def condition(name: str, comparison_operator: str, value: Any = None) -> dict[str, Any]:
    """One condition as Dify's ``Condition.model_dump()`` writes it (value null when left empty)."""
    return {"name": name, "comparison_operator": comparison_operator, "value": value}


def metadata_condition(
    conditions: list[dict[str, Any]] | None = None, logical_operator: str | None = "and"
) -> dict[str, Any]:
    """``MetadataCondition.model_dump()``: ``conditions`` stays null when none were given."""
    return {"logical_operator": logical_operator, "conditions": conditions}


@dataclass
class DifyClient:
    """Dify talking to the external knowledge API registered as ``endpoint`` with ``api_key``."""

    endpoint: str
    api_key: str
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff_factor: float = BACKOFF_FACTOR
    # Called with (attempt, response) after every answer, before a retry: tests change the world there.
    on_response: Callable[[int, httpx.Response], None] | None = None
    responses: list[httpx.Response] = field(default_factory=list)

    def _make_request(self, method: str, url: str, **kwargs) -> httpx.Response:
        retries = 0
        while retries <= self.max_retries:
            with httpx.Client() as client:
                response = client.request(method=method, url=url, follow_redirects=True, timeout=60, **kwargs)
            self.responses.append(response)
            if self.on_response:
                self.on_response(retries, response)
            if response.status_code not in RETRIED_STATUSES:
                return response
            retries += 1
            if retries <= self.max_retries:
                time.sleep(self.backoff_factor * (2 ** (retries - 1)))
        raise MaxRetriesReached(f"Reached maximum retries ({self.max_retries}) for URL {url}")

    def request_params(
        self,
        *,
        query: str,
        knowledge_id: str,
        top_k: int = 4,
        score_threshold_enabled: bool = False,
        score_threshold: float = 0.5,
        metadata_condition: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "retrieval_setting": {
                "top_k": top_k,
                "score_threshold": score_threshold if score_threshold_enabled else 0.0,
            },
            "query": query,
            "knowledge_id": knowledge_id,
        }
        if metadata_condition:
            params["metadata_condition"] = metadata_condition
        return params

    def retrieve(self, **kwargs) -> list[dict[str, Any]]:
        """Dify's records for a query: [] for any answer but 200, as Dify does."""
        response = self._make_request(
            "POST",
            f"{self.endpoint}/retrieval",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
            content=json.dumps(self.request_params(**kwargs)),
        )
        if response.status_code == 200:
            return response.json().get("records", [])
        return []

    def check_endpoint(self) -> None:
        """Dify's check when the API is registered: raises ValueError as Dify does."""
        url = f"{self.endpoint}/retrieval"
        response = self._make_request("POST", url, headers={"Authorization": f"Bearer {self.api_key}"})
        if response.status_code in CHECK_FAILURES:
            raise ValueError(
                f"{CHECK_FAILURES[response.status_code]}: failed to connect to the endpoint: {url}"
            )
