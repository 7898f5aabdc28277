"""Judged lookups as labelled questions for the level model's refit (``calibrate_thresholds
--refit --from-feedback``): the staff calibration from feedback, for the level model.

Each judged call is one vote, chosen as the threshold calibration chooses it
(``observability.calibration.calibration_votes``: the staff judgement when staff judged the call,
else its agent's). A vote labels what the agent was given: the call's primary document, with the
evidence the lookup recorded for it (``retrieval_details["levels"]``). Helpful: the primary answers
the question; not helpful: it does not (the right document, if any, is unknown, so no other
candidate is labelled). A call the model did not decide (no evidence: the seeds' rule, another
script, a PRECISE keyword) gives no row, nor a call recorded before some of the model's evidence
existed (``level_features.FEATURES``): fitting a missing feature as 0 would teach the model that
evidence it never saw was absent.

No agent can steer it, by the calibration's own rule: votes of at least ``MIN_AGENTS`` agents or
staff votes, and no agent's votes count for more than a third of the total
(``agent_vote_weights``): an agent held to a share keeps only that many of its latest votes.
"""

from __future__ import annotations

import math
from collections import defaultdict

from observability.calibration import MIN_AGENTS, VoteFilter, agent_vote_weights, calibration_votes
from observability.models import InvocationFeedback, ToolInvocation
from retrieval.lookup.level_features import FEATURES
from retrieval.staff.level_fit import Asked

AGENT = InvocationFeedback.Source.AGENT
STAFF = InvocationFeedback.Source.STAFF


class FeedbackRefused(ValueError):
    """The judgements cannot be used to refit: the message says why."""


def _held_to_their_share(votes: list[dict]) -> list[dict]:
    weights = agent_vote_weights(votes)
    by_agent: dict[str, list[dict]] = defaultdict(list)
    kept = []
    for vote in votes:
        if vote["source"] == AGENT:
            by_agent[vote["voter"]].append(vote)
        else:
            kept.append(vote)
    for agent, own in by_agent.items():
        keep = max(1, math.floor(weights.get(agent, 1.0) * len(own) + 1e-9))
        kept.extend(sorted(own, key=lambda v: v["invocation_id"])[-keep:])
    return sorted(kept, key=lambda v: v["invocation_id"])


def _judged_candidate(details: dict) -> dict | None:
    returned = details.get("returned_doc_keys") if isinstance(details, dict) else None
    if not isinstance(returned, list) or not returned:
        return None
    levels = details.get("levels") if isinstance(details.get("levels"), dict) else {}
    for candidate in levels.get("candidates") or []:
        if (
            isinstance(candidate, dict)
            and candidate.get("doc_key") == returned[0]
            and isinstance(candidate.get("features"), dict)
            and candidate["features"]
            and all(f in candidate["features"] for f in FEATURES)
            and not candidate.get("precise")
        ):
            return candidate
    return None


def feedback_asked(vote_filter: VoteFilter | None = None) -> list[Asked]:
    """The judged lookups as ``Asked`` rows (expected = the primary when it helped, else None)."""
    votes = calibration_votes(vote_filter)
    agents = {v["voter"] for v in votes if v["source"] == AGENT}
    if not any(v["source"] == STAFF for v in votes) and len(agents) < MIN_AGENTS:
        raise FeedbackRefused(
            f"feedback from at least {MIN_AGENTS} agents, or staff judgements, is needed to refit; "
            f"there are judgements of {len(agents)} agent(s) and no staff"
        )
    kept = _held_to_their_share(votes)
    details = dict(
        ToolInvocation.objects.filter(pk__in=[v["invocation_id"] for v in kept]).values_list(
            "pk", "retrieval_details"
        )
    )
    asked = []
    for vote in kept:
        candidate = _judged_candidate(details.get(vote["invocation_id"]) or {})
        if candidate is None:
            continue
        expected = candidate["doc_key"] if vote["helpful"] else None
        asked.append(Asked(f"invocation-{vote['invocation_id']}", expected, [candidate]))
    return asked
