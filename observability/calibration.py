"""Threshold calibration from feedback (seed 000 Phase 2, 分数反馈调优).

Agents (API, their own calls only) and staff (admin) judge whether a lookup's result helped.
Each judged invocation is one vote (the staff judgement when staff judged it, else its agent's);
grouped by the call's ``l1_top_similarity`` in 0.05-wide bands, the votes show where results stop
helping. Lookups and Dify calls are calibrated apart (``VoteFilter.tool``).

No agent can steer it (``agent_vote_weights``): no agent's votes count for more than a third of
the total weight (an agent with more votes has each of them counted for less; staff votes count
in full), and a suggestion needs votes of at least three agents, or staff votes, and at least
``OBSERVABILITY_CALIBRATION_MIN_FEEDBACK`` judgements both as cast and as counted. Votes that all
come from one agent give a suggestion only when staff choose to use them (``VoteFilter.single_agent``),
as they are. The suggestion:

- REFERENCE threshold: the band edge that best separates helpful from unhelpful results, i.e.
  maximises Youden's J = (share of helpful results at or above it) - (share of unhelpful ones at
  or above it). Ties go to the edge closest to the threshold in force (the smallest change).
- HIGHLY_RELEVANT threshold: the lowest band edge above REFERENCE at or above which at least
  ``OBSERVABILITY_CALIBRATION_TARGET_PRECISION`` of the judged results helped (the level tells the
  agent "searching on is unlikely to find better", so it must be right that often), with at least
  ``OBSERVABILITY_CALIBRATION_MIN_BAND`` judgements there. No such edge: it stays as it is.

Nothing changes until a staff member applies a pair (``calibration_apply``), which is recorded
with who and when. ``thresholds_in_force`` is what the lookup uses (it reads the same rows through
``retrieval.lookup.thresholds.current_thresholds``): the latest applied pair, else the RETRIEVAL_*
settings; that function re-reads it every few seconds, so a change takes effect without a restart.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction
from django.utils.translation import gettext

from observability.models import InvocationFeedback, ThresholdCalibration
from observability.records import ToolName

logger = logging.getLogger(__name__)

BANDS = 20  # 0.05 wide, as the dashboard's histogram
# No agent's votes count for more than this share of the total weight.
MAX_AGENT_SHARE = 1 / 3
# A suggestion from agents' votes needs votes of at least this many agents (or staff votes).
MIN_AGENTS = 3


@dataclass(frozen=True)
class Thresholds:
    highly_relevant: float
    reference: float
    # "settings" or "calibration": whether a staff-applied calibration is in force (the lookup
    # reads it so: retrieval.lookup.thresholds._calibrated).
    source: str
    calibration_id: int | None = None
    # Without a calibration, the retrieval app's word for where its pair came from: "settings",
    # "profile:<model>", "settings+profile:<model>" (one of the two set) or "default".
    origin: str = "settings"

    @property
    def source_label(self) -> str:
        """Where the pair came from, as the staff pages say it ("profile use-multilingual-v3")."""
        if self.source == "calibration":
            return thresholds_source_label("calibration", calibration_id=self.calibration_id)
        return thresholds_source_label(self.origin)


def thresholds_source_label(source: str, *, calibration_id: int | None = None) -> str:
    """ "profile use-multilingual-v3", "settings", "calibration #4"... for a thresholds source."""
    if source == "calibration" or source.startswith("calibration:"):
        number = calibration_id if calibration_id is not None else source.partition(":")[2]
        return gettext("calibration #%(id)s") % {"id": number}
    if source.startswith("settings+profile:"):
        return gettext("settings + profile %(name)s") % {"name": source.partition(":")[2]}
    if source.startswith("profile:"):
        return gettext("profile %(name)s") % {"name": source.partition(":")[2]}
    if source == "default":
        return gettext("the seeds' default (no profile for this model)")
    return gettext("settings")


class ThresholdPair(Protocol):
    highly_relevant: float
    reference: float


# The pair before any staff calibration (explicit settings, else the embedding model's profile)
# is the retrieval app's to know (``retrieval.lookup.thresholds.settings_thresholds``). It
# registers its reader at start-up (``RetrievalConfig.ready``), so observability never imports
# retrieval: the dependency runs retrieval -> observability only.
_settings_reader: Callable[[], ThresholdPair] | None = None


def settings_thresholds_reader_register(reader: Callable[[], ThresholdPair]) -> None:
    global _settings_reader
    _settings_reader = reader


def _from_settings() -> Thresholds:
    if _settings_reader is None:
        raise ImproperlyConfigured("no reader of the thresholds in settings: is the retrieval app installed?")
    base = _settings_reader()
    # The reader says where its pair came from (the model's profile, explicit settings...): the
    # pages show it, so a profile is not called "settings".
    origin = getattr(base, "source", "") or "settings"
    return Thresholds(
        highly_relevant=base.highly_relevant, reference=base.reference, source="settings", origin=origin
    )


def thresholds_in_force() -> Thresholds:
    """The thresholds lookups use now, for the pages to draw: the latest staff-applied
    calibration, else the settings. (The lookup itself reads them through
    ``retrieval.lookup.thresholds.current_thresholds``, which applies the same rule with a short
    per-process cache.)"""
    latest = ThresholdCalibration.objects.order_by("-applied_at", "-id").first()
    if latest is None or latest.reverted:
        return _from_settings()
    base = _from_settings()
    return Thresholds(
        highly_relevant=base.highly_relevant
        if latest.highly_relevant_threshold is None
        else latest.highly_relevant_threshold,
        reference=base.reference if latest.reference_threshold is None else latest.reference_threshold,
        source="calibration",
        calibration_id=latest.pk,
    )


LOOKUP_TOOL = ToolName.LOOKUP
DIFY_TOOL = ToolName.DIFY
# Dify calls are judged apart: their similarity is compared with Dify's own score_threshold, not
# with the lookup's levels, so their judgements say nothing about REFERENCE / HIGHLY_RELEVANT.
CALIBRATED_TOOLS = (LOOKUP_TOOL, DIFY_TOOL)


@dataclass(frozen=True)
class VoteFilter:
    """Which judgements a calibration counts: a tool, optionally one source, minus some agents;
    ``single_agent`` lets staff take a suggestion from one agent's votes on purpose."""

    tool: str = LOOKUP_TOOL
    source: str = ""  # "", "STAFF" or "AGENT"
    exclude_agents: tuple[str, ...] = ()
    single_agent: bool = False


def calibration_votes(vote_filter: VoteFilter | None = None) -> list[dict]:
    """One vote per judged invocation: ``{invocation_id, similarity, helpful, source, voter}``.

    An invocation judged by staff counts with the staff judgement (the latest one, if several
    staff judged it); otherwise with its agent's own judgement. So one agent judging a call
    many times, or many tokens judging one call, is still one vote.
    """
    vote_filter = vote_filter or VoteFilter()
    rows = (
        InvocationFeedback.objects.filter(
            invocation__tool_name=vote_filter.tool, invocation__l1_top_similarity__isnull=False
        )
        .values(
            "invocation_id",
            "source",
            "helpful",
            "updated_at",
            "user__username",
            "invocation__l1_top_similarity",
        )
        .order_by("invocation_id", "updated_at")
    )
    chosen: dict[int, dict] = {}
    for row in rows:  # oldest first: a later judgement of the same rank replaces an earlier one
        staff = row["source"] == InvocationFeedback.Source.STAFF
        current = chosen.get(row["invocation_id"])
        if current is not None and current["source"] == InvocationFeedback.Source.STAFF and not staff:
            continue
        chosen[row["invocation_id"]] = {
            "invocation_id": row["invocation_id"],
            "similarity": row["invocation__l1_top_similarity"],
            "helpful": row["helpful"],
            "source": row["source"],
            # A judgement whose user was deleted still counts, under a name of its own.
            "voter": row["user__username"] or "(deleted user)",
        }
    votes = list(chosen.values())
    if vote_filter.source:
        votes = [v for v in votes if v["source"] == vote_filter.source]
    if vote_filter.exclude_agents:
        excluded = set(vote_filter.exclude_agents)
        votes = [
            v
            for v in votes
            if not (v["source"] == InvocationFeedback.Source.AGENT and v["voter"] in excluded)
        ]
    return votes


def agent_vote_weights(votes: list[dict], *, as_cast: bool = False) -> dict[str, float]:
    """What one vote of each agent counts for: 1, or less for an agent whose votes would otherwise
    be more than MAX_AGENT_SHARE of the total weight, so that its votes together count for
    exactly that share. Staff votes count 1 each and are never held. ``as_cast``: every vote
    counts 1 (staff chose to use one agent's votes as they are).

    The share is reached by holding the largest agents one at a time: an agent is held when its
    votes exceed ``MAX_AGENT_SHARE`` of what everyone else counts for plus the held agents' share.
    """
    counts = Counter(v["voter"] for v in votes if v["source"] == InvocationFeedback.Source.AGENT)
    if as_cast:
        return dict.fromkeys(counts, 1.0)
    staff = sum(1 for v in votes if v["source"] == InvocationFeedback.Source.STAFF)
    held: set[str] = set()
    while True:
        free = staff + sum(n for agent, n in counts.items() if agent not in held)
        room = 1 - MAX_AGENT_SHARE * len(held)
        # Each held agent counts for `cap` in all: cap = share x (free + held x cap).
        cap = MAX_AGENT_SHARE * free / room if room > 1e-9 else 0.0
        over = [agent for agent, n in counts.items() if agent not in held and n > cap + 1e-9]
        if not over:
            break
        held.add(max(over, key=lambda agent: (counts[agent], agent)))
    return {agent: min(1.0, cap / n) if agent in held else 1.0 for agent, n in counts.items()}


def _tidy(value: float) -> float | int:
    """A weighted count as shown: a whole number when it is one, else three decimals."""
    rounded = round(value)
    return int(rounded) if abs(value - rounded) < 1e-9 else round(value, 3)


def calibration_bands(vote_filter: VoteFilter | None = None) -> dict:
    """Votes per 0.05 similarity band: helpful, unhelpful and the helpful rate as cast (one per
    judged call), and ``counted_helpful`` / ``counted_unhelpful`` as the suggestion counts them
    (each agent held to MAX_AGENT_SHARE of the weight, ``agent_vote_weights``); plus who voted:
    by source, and by agent with its votes, its share of them and what they count for.

    Only judgements on calls that had an L1 similarity count (PRECISE-by-keyword lookups
    without one say nothing about the similarity thresholds).
    """
    vote_filter = vote_filter or VoteFilter()
    votes = calibration_votes(vote_filter)
    bands = [
        {
            "lo": round(i / BANDS, 4),
            "hi": round((i + 1) / BANDS, 4),
            "helpful": 0,
            "unhelpful": 0,
            "counted_helpful": 0.0,
            "counted_unhelpful": 0.0,
        }
        for i in range(BANDS)
    ]
    by_source = {s: {"helpful": 0, "unhelpful": 0} for s in InvocationFeedback.Source.values}
    agent_voters = {v["voter"] for v in votes if v["source"] == InvocationFeedback.Source.AGENT}
    staff_votes = sum(1 for v in votes if v["source"] == InvocationFeedback.Source.STAFF)
    # The one agent every vote comes from, when no staff voted and only one agent did.
    single_agent = next(iter(agent_voters)) if len(agent_voters) == 1 and not staff_votes else None
    weights = agent_vote_weights(votes, as_cast=bool(single_agent and vote_filter.single_agent))
    by_agent: dict[str, dict] = {}
    for vote in votes:
        band = bands[min(max(int(vote["similarity"] * BANDS), 0), BANDS - 1)]
        verdict = "helpful" if vote["helpful"] else "unhelpful"
        agent = vote["source"] == InvocationFeedback.Source.AGENT
        band[verdict] += 1
        band[f"counted_{verdict}"] += weights[vote["voter"]] if agent else 1.0
        by_source[vote["source"]][verdict] += 1
        if agent:
            by_agent.setdefault(vote["voter"], {"agent": vote["voter"], "helpful": 0, "unhelpful": 0})
            by_agent[vote["voter"]][verdict] += 1
    counted = staff_votes + sum(weights[a] * (s["helpful"] + s["unhelpful"]) for a, s in by_agent.items())
    for name, row in by_agent.items():
        row["votes"] = row["helpful"] + row["unhelpful"]
        row["share"] = round(row["votes"] / len(votes), 3)
        row["counted"] = _tidy(weights[name] * row["votes"])
        row["counted_share"] = round(weights[name] * row["votes"] / counted, 3) if counted else 0.0
        row["held"] = weights[name] < 1.0
    for band in bands:
        judged = band["helpful"] + band["unhelpful"]
        band["judged"] = judged
        band["rate"] = round(band["helpful"] / judged, 3) if judged else None
        band["counted_helpful"] = _tidy(band["counted_helpful"])
        band["counted_unhelpful"] = _tidy(band["counted_unhelpful"])
    agents = sorted(by_agent.values(), key=lambda a: (-a["votes"], a["agent"]))
    return {
        "tool": vote_filter.tool,
        "filter": asdict(vote_filter),
        "bands": bands,
        # As cast (one vote per judged call) ...
        "votes": len(votes),
        "helpful": sum(b["helpful"] for b in bands),
        "unhelpful": sum(b["unhelpful"] for b in bands),
        # ... and as the suggestion counts them.
        "counted_helpful": _tidy(sum(b["counted_helpful"] for b in bands)),
        "counted_unhelpful": _tidy(sum(b["counted_unhelpful"] for b in bands)),
        "counted": _tidy(counted),
        "by_source": by_source,
        "by_agent": agents,
        # Some agent's votes count for less than they were cast (it would be above a third).
        "held": any(a["held"] for a in agents),
        "single_agent": single_agent,
    }


def calibration_suggest(*, bands: dict, current: Thresholds) -> dict:
    """The suggested pair and the numbers behind it (see the module docstring).

    Returns ``{"ok", "reason", "reference", "highly_relevant", "cuts": [...], ...}``; ``ok`` is
    False (with the reason) when there is too little feedback to suggest anything, or when it
    would rest on fewer than three agents. The cuts count the votes as ``calibration_bands``
    counts them (no agent above a third).
    """
    helpful, unhelpful = bands["helpful"], bands["unhelpful"]
    votes = bands.get("votes", helpful + unhelpful)
    min_feedback = settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK
    target = settings.OBSERVABILITY_CALIBRATION_TARGET_PRECISION
    min_band = settings.OBSERVABILITY_CALIBRATION_MIN_BAND
    result = {
        "ok": False,
        "reason": "",
        "helpful": helpful,
        "unhelpful": unhelpful,
        "votes": votes,
        "target_precision": target,
        "min_feedback": min_feedback,
        "current": asdict(current),
        "cuts": [],
        "reference": None,
        "highly_relevant": None,
    }
    if votes < min_feedback:
        result["reason"] = gettext(
            "%(count)s judgements with a similarity; at least %(needed)s are needed "
            "(OBSERVABILITY_CALIBRATION_MIN_FEEDBACK)."
        ) % {"count": votes, "needed": min_feedback}
        return result
    as_cast = bands.get("single_agent") is not None and bands.get("filter", {}).get("single_agent")
    if bands.get("single_agent") is not None and not as_cast:
        result["reason"] = gettext(
            "All %(count)s votes come from one agent (%(agent)s): a suggestion needs staff votes or "
            "votes of at least three agents, unless you choose to use this agent's votes alone."
        ) % {"count": votes, "agent": bands["single_agent"]}
        result["single_agent_refused"] = True
        return result
    agents = [a["agent"] for a in bands.get("by_agent", [])]
    staff_votes = sum(bands.get("by_source", {}).get(InvocationFeedback.Source.STAFF, {}).values())
    if not as_cast and 0 < len(agents) < MIN_AGENTS and not staff_votes:
        result["reason"] = gettext(
            "The %(count)s votes come from only %(agents)s agents (%(names)s): a suggestion needs staff "
            "votes or votes of at least three agents, none counting for more than a third."
        ) % {"count": votes, "agents": len(agents), "names": ", ".join(agents)}
        result["few_agents_refused"] = True
        return result
    helpful = bands.get("counted_helpful", helpful)
    unhelpful = bands.get("counted_unhelpful", unhelpful)
    result["counted"] = _tidy(helpful + unhelpful)
    if helpful + unhelpful < min_feedback - 1e-9:
        result["reason"] = gettext(
            "%(count)s judgements count as %(counted)s once no agent counts for more than a third of "
            "them; at least %(needed)s are needed (OBSERVABILITY_CALIBRATION_MIN_FEEDBACK)."
        ) % {"count": votes, "counted": result["counted"], "needed": min_feedback}
        return result
    if not helpful or not unhelpful:
        result["reason"] = gettext(
            "All judgements agree (all helpful or all unhelpful): nothing to separate."
        )
        return result

    # Cut c = "similarity >= c". Walk the bands from the top down, accumulating what lies above.
    cuts = []
    above_helpful = above_unhelpful = 0
    for band in reversed(bands["bands"]):
        above_helpful += band.get("counted_helpful", band["helpful"])
        above_unhelpful += band.get("counted_unhelpful", band["unhelpful"])
        tpr = above_helpful / helpful
        fpr = above_unhelpful / unhelpful
        above = above_helpful + above_unhelpful
        cuts.append(
            {
                "cut": band["lo"],
                "helpful_above": _tidy(above_helpful),
                "unhelpful_above": _tidy(above_unhelpful),
                "tpr": round(tpr, 3),
                "fpr": round(fpr, 3),
                "j": round(tpr - fpr, 3),
                "precision_above": round(above_helpful / above, 3) if above > 1e-9 else None,
            }
        )
    cuts.reverse()
    result["cuts"] = cuts

    # Cut 0.0 keeps everything (J = 0): only edges inside (0, 1) are candidates.
    candidates = [c for c in cuts if c["cut"] > 0]
    best_j = max(c["j"] for c in candidates)
    reference = min(
        (c for c in candidates if c["j"] == best_j), key=lambda c: abs(c["cut"] - current.reference)
    )["cut"]

    precise_enough = [
        c
        for c in candidates
        if c["cut"] > reference
        and c["precision_above"] is not None
        and c["precision_above"] >= target
        and c["helpful_above"] + c["unhelpful_above"] >= min_band
    ]
    if precise_enough:
        highly_relevant = precise_enough[0]["cut"]
        hr_reason = gettext("lowest edge above REFERENCE with ≥ %(target)s helpful above it") % {
            "target": f"{target:.0%}"
        }
    else:
        highly_relevant = max(current.highly_relevant, reference)
        hr_reason = gettext("no edge above REFERENCE reaches %(target)s helpful: kept as it is") % {
            "target": f"{target:.0%}"
        }
    result.update(
        ok=True,
        reference=reference,
        highly_relevant=round(highly_relevant, 4),
        best_j=best_j,
        reason=gettext("REFERENCE: best separation (J = %(j).3f); HIGHLY_RELEVANT: %(hr)s.")
        % {"j": best_j, "hr": hr_reason},
    )
    return result


@transaction.atomic
def calibration_apply(
    *,
    highly_relevant_threshold: float,
    reference_threshold: float,
    applied_by,
    evidence: dict | None = None,
    note: str = "",
) -> ThresholdCalibration:
    """Make a threshold pair the one in force, recording who applied it, when and on what data."""
    errors = {}
    for field, value in (
        ("highly_relevant_threshold", highly_relevant_threshold),
        ("reference_threshold", reference_threshold),
    ):
        if value is None or not 0.0 <= float(value) <= 1.0:
            errors[field] = f"must be a similarity between 0 and 1, got {value!r}"
    if not errors and reference_threshold > highly_relevant_threshold:
        errors["reference_threshold"] = (
            f"must not exceed highly_relevant_threshold ({reference_threshold} > {highly_relevant_threshold})"
        )
    if errors:
        raise ValidationError(errors)
    evidence = evidence or {}
    calibration = ThresholdCalibration.objects.create(
        highly_relevant_threshold=float(highly_relevant_threshold),
        reference_threshold=float(reference_threshold),
        applied_by=applied_by,
        evidence=evidence,
        # One per judged call (a held agent's votes count for less in the suggestion, not here).
        feedback_count=int(
            evidence.get("votes", int(evidence.get("helpful", 0)) + int(evidence.get("unhelpful", 0)))
        ),
        note=note,
    )
    logger.info(
        "thresholds: %s applied REFERENCE %.3f / HIGHLY_RELEVANT %.3f (calibration #%s)",
        applied_by,
        reference_threshold,
        highly_relevant_threshold,
        calibration.pk,
    )
    return calibration


@transaction.atomic
def calibration_revert(*, applied_by, note: str = "") -> ThresholdCalibration:
    """Hand the thresholds back to the RETRIEVAL_* settings (recorded like an application)."""
    calibration = ThresholdCalibration.objects.create(reverted=True, applied_by=applied_by, note=note)
    logger.info("thresholds: %s reverted to the settings (calibration #%s)", applied_by, calibration.pk)
    return calibration


def vote_filter_from(params) -> VoteFilter:
    """A VoteFilter from the calibration page's query string (unknown values fall back)."""
    tool = params.get("tool") or LOOKUP_TOOL
    source = params.get("source") or ""
    return VoteFilter(
        tool=tool if tool in CALIBRATED_TOOLS else LOOKUP_TOOL,
        source=source if source in InvocationFeedback.Source.values else "",
        exclude_agents=tuple(sorted({a for a in params.getlist("exclude_agent") if a})),
        single_agent=params.get("single_agent") == "1",
    )


def calibration_overview(vote_filter: VoteFilter) -> dict:
    """What the calibration page shows: thresholds in force, votes per band, the suggestion, and
    the progress toward the minimum number of votes."""
    current = thresholds_in_force()
    bands = calibration_bands(vote_filter)
    suggestion = calibration_suggest(bands=bands, current=current)
    votes = bands["votes"]
    needed = settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK
    return {
        "current": current,
        "bands": bands,
        "suggestion": suggestion,
        "progress": {
            "votes": votes,
            "needed": needed,
            "percent": min(100, round(100 * votes / needed)) if needed else 100,
        },
        # Only the lookup's votes can set the lookup's thresholds.
        "appliable": vote_filter.tool == LOOKUP_TOOL,
    }


def unjudged_invocations(*, tool: str, limit: int = 50):
    """The latest calls of ``tool`` with a similarity that nobody judged yet, newest first."""
    from observability.models import ToolInvocation

    return (
        ToolInvocation.objects.filter(tool_name=tool, l1_top_similarity__isnull=False, feedback__isnull=True)
        .select_related("agent")
        .order_by("-created_at")[:limit]
    )
