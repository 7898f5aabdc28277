"""Plotly figures (plain dicts: ``{"data": [...], "layout": {...}}``) built from selector output.

The pages put these into the HTML with ``json_script`` and ``observability/dashboard.js`` hands
them to plotly.js unchanged, so what a test reads from the page is exactly what is drawn. Every
bar carries, in ``customdata``, the invocation-list URL filtered to what the bar counts: clicking
it opens that list.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from observability import links, metrics
from observability.records import DedupReason, RelevanceLevel

# One colour per level, the same on every chart.
LEVEL_COLOURS = {
    RelevanceLevel.PRECISE.value: "#1a7f37",
    RelevanceLevel.HIGHLY_RELEVANT.value: "#2f81f7",
    RelevanceLevel.REFERENCE.value: "#d4a72c",
    RelevanceLevel.DEDUPED.value: "#8250df",
    "not found": "#cf222e",
}
DEDUP_COLOURS = {
    DedupReason.DOC_RETRIEVED.value: "#8250df",
    DedupReason.DOMAIN_RETRIEVED.value: "#bf3989",
    "none": "#8c959f",
}
FONT = '"WenQuanYi Micro Hei", "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif'

Link = Callable[..., str]


def count_axis(title: str, counts) -> dict:
    """A y axis of whole numbers: ticks 1 apart for small counts (plotly would draw 0.5 steps)."""
    top = max([0, *counts])
    step = 1 if top <= 8 else None
    axis = {"title": {"text": title}, "rangemode": "tozero", "tickformat": "d"}
    if step:
        axis["dtick"] = step
    return axis


def _layout(title: str, **extra) -> dict:
    layout = {
        "title": {"text": title, "font": {"size": 15}},
        "font": {"family": FONT, "size": 12},
        "margin": {"l": 50, "r": 20, "t": 50, "b": 50},
        "height": 320,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "closest",
    }
    layout.update(extra)
    return layout


def distribution_figure(*, rows: list[dict], title: str, colours: dict[str, str], link: Link) -> dict:
    """One bar per value, labelled "count (percent%)"; ``link(value)`` is the bar's list URL."""
    return {
        "data": [
            {
                "type": "bar",
                "x": [metrics.label_display(row["label"]) for row in rows],
                "y": [row["count"] for row in rows],
                "text": [f"{row['count']} ({row['percent']}%)" for row in rows],
                "textposition": "auto",
                "marker": {"color": [colours.get(row["label"], "#57606a") for row in rows]},
                "customdata": [link(row["value"]) for row in rows],
                "hovertemplate": "%{x}: %{text}<extra></extra>",
            }
        ],
        "layout": _layout(
            title,
            xaxis={"automargin": True},
            yaxis=count_axis(gettext("calls"), [row["count"] for row in rows]),
        ),
    }


def similarity_figure(
    *,
    histogram: dict,
    reference: float,
    highly_relevant: float,
    title: str,
    link: Callable[[float, float], str],
) -> dict:
    """Stacked histogram of l1_top_similarity by level, with both thresholds drawn as lines."""
    bins = histogram["bins"]
    centres = [round((b["lo"] + b["hi"]) / 2, 4) for b in bins]
    urls = [link(b["lo"], b["hi"]) for b in bins]
    data = [
        {
            "type": "bar",
            "name": metrics.label_display(label),
            "x": centres,
            "y": counts,
            "width": [round(1 / len(bins), 4)] * len(bins),
            "marker": {"color": LEVEL_COLOURS.get(label, "#57606a")},
            "customdata": urls,
            "hovertemplate": f"{label}<br>similarity %{{x:.3f}} ± 0.025: %{{y}}<extra></extra>",
        }
        for label, counts in histogram["levels"].items()
        if any(counts)
    ]

    def threshold(x: float, text: str, colour: str, side: str) -> tuple[dict, dict]:
        line = {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": x,
            "x1": x,
            "y0": 0,
            "y1": 1,
            "line": {"color": colour, "width": 2, "dash": "dash"},
        }
        note = {
            "x": x,
            "y": 1,
            "xref": "x",
            "yref": "paper",
            "text": text,
            "showarrow": False,
            # REFERENCE's label sits left of its line, HIGHLY_RELEVANT's right: close thresholds
            # do not overprint each other.
            "xanchor": side,
            "yanchor": "bottom",
            "font": {"color": colour},
        }
        return line, note

    ref_line, ref_note = threshold(reference, f"REFERENCE ≥ {reference:.2f}", "#9a6700", "right")
    hr_line, hr_note = threshold(
        highly_relevant, f"HIGHLY_RELEVANT ≥ {highly_relevant:.2f}", "#0969da", "left"
    )
    return {
        "data": data,
        "layout": _layout(
            title,
            barmode="stack",
            xaxis={
                "title": {"text": gettext("l1_top_similarity (normalised similarity)")},
                "range": [0, 1],
                "dtick": 0.1,
            },
            yaxis=count_axis(
                gettext("calls"),
                [sum(c) for c in zip(*histogram["levels"].values(), strict=True)]
                if histogram["levels"]
                else [],
            ),
            shapes=[ref_line, hr_line],
            annotations=[ref_note, hr_note],
            legend={"orientation": "h", "y": -0.25, "traceorder": "normal"},
            margin={"l": 50, "r": 20, "t": 70, "b": 80},
            height=360,
        ),
        "thresholds": {"reference": reference, "highly_relevant": highly_relevant},
    }


def over_time_figure(
    *, over_time: dict, title: str, colours: dict[str, str], values: dict[str, str | None], link: Link
) -> dict:
    """Stacked bars per hour or day, one trace per level (or dedup reason)."""
    data = [
        {
            "type": "bar",
            "name": metrics.label_display(label),
            "x": over_time["x"],
            "y": counts,
            "marker": {"color": colours.get(label, "#57606a")},
            "customdata": [link(values.get(label), x, over_time["bucket"]) for x in over_time["x"]],
            "hovertemplate": f"{label}<br>%{{x}}: %{{y}}<extra></extra>",
        }
        for label, counts in over_time["series"].items()
    ]
    return {
        "data": data,
        "layout": _layout(
            title,
            barmode="stack",
            xaxis={"type": "category", "tickangle": -45, "nticks": 12, "automargin": True},
            yaxis=count_axis(
                gettext("calls"),
                [sum(c) for c in zip(*over_time["series"].values(), strict=True)]
                if over_time["series"]
                else [],
            ),
            # Legend on the right: below the plot it collides with the slanted time labels.
            legend={"traceorder": "normal", "font": {"size": 11}},
            margin={"l": 50, "r": 10, "t": 50, "b": 60},
            height=380,
        ),
    }


def latency_over_time_figure(*, over_time: dict, title: str) -> dict:
    """p50 and p95 of duration_ms per hour or day, as lines; a bucket without calls is a gap."""
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": name,
            "x": over_time["x"],
            "y": over_time[key],
            "connectgaps": False,
            "line": {"color": colour},
            "customdata": over_time["calls"],
            "hovertemplate": f"{name}<br>%{{x}}: %{{y}} ms (%{{customdata}} calls)<extra></extra>",
        }
        for key, name, colour in (("p50", "p50", "#2f81f7"), ("p95", "p95", "#cf222e"))
    ]
    return {
        "data": data,
        "layout": _layout(
            title,
            xaxis={"type": "category", "tickangle": -45, "nticks": 12, "automargin": True},
            yaxis={"title": {"text": "ms"}, "rangemode": "tozero"},
            legend={"traceorder": "normal", "font": {"size": 11}},
            margin={"l": 50, "r": 10, "t": 50, "b": 60},
            height=380,
        ),
    }


def sessions_figure(*, sessions: dict, title: str) -> dict:
    """Sessions by how many calls they made (the seeds' symptom: 20+ per conversation)."""
    return {
        "data": [
            {
                "type": "bar",
                "x": sessions["histogram"]["labels"],
                "y": sessions["histogram"]["sessions"],
                "text": [str(n) for n in sessions["histogram"]["sessions"]],
                "textposition": "auto",
                "marker": {"color": "#57606a"},
                "hovertemplate": "%{x} calls: %{y} sessions<extra></extra>",
            }
        ],
        "layout": _layout(
            title,
            xaxis={"title": {"text": gettext("calls per session")}, "type": "category"},
            yaxis=count_axis(gettext("sessions"), sessions["histogram"]["sessions"]),
        ),
    }


def calibration_figure(*, bands: list[dict], reference: float, highly_relevant: float, title: str) -> dict:
    """Helpful vs not helpful judgements per similarity band, with the helpful rate as a line."""
    x = [round((b["lo"] + b["hi"]) / 2, 4) for b in bands]
    figure = {
        "data": [
            {
                "type": "bar",
                "name": gettext("helpful"),
                "x": x,
                "y": [b["helpful"] for b in bands],
                "marker": {"color": "#1a7f37"},
                "width": [round(b["hi"] - b["lo"], 4) for b in bands],
            },
            {
                "type": "bar",
                "name": gettext("not helpful"),
                "x": x,
                "y": [b["unhelpful"] for b in bands],
                "marker": {"color": "#cf222e"},
                "width": [round(b["hi"] - b["lo"], 4) for b in bands],
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": gettext("helpful rate"),
                # Every band, None where nobody voted: no line is drawn across bands without data.
                "x": x,
                "y": [b["rate"] for b in bands],
                "connectgaps": False,
                "yaxis": "y2",
                "line": {"color": "#0969da"},
            },
        ],
        "layout": _layout(
            title,
            barmode="stack",
            xaxis={"title": {"text": "l1_top_similarity"}, "range": [0, 1], "dtick": 0.1},
            yaxis={"title": {"text": gettext("judgements")}, "rangemode": "tozero"},
            yaxis2={
                "overlaying": "y",
                "side": "right",
                "range": [0, 1.05],
                "dtick": 0.25,
                "tickformat": ".0%",
                "showgrid": False,
                "title": {"text": gettext("helpful rate")},
            },
            legend={"orientation": "h", "y": -0.25, "traceorder": "normal"},
            margin={"l": 50, "r": 50, "t": 50, "b": 80},
            height=360,
        ),
    }
    lines = similarity_figure(
        histogram={"bins": [], "levels": {}},
        reference=reference,
        highly_relevant=highly_relevant,
        title=title,
        link=lambda lo, hi: "",
    )["layout"]
    figure["layout"]["shapes"] = lines["shapes"]
    figure["layout"]["annotations"] = lines["annotations"]
    return figure


# --- the pages' figures, with their links into the invocation list ------------------------------

BUCKETS = {"hour": _("hour"), "day": _("day")}


def dashboard_figures(*, data: dict, filters: metrics.InvocationFilter, thresholds) -> dict:
    scope = links.scope(filters)

    def by(param: str):
        return lambda value: links.invocation_list_url(**scope, **{param: value or "none"})

    def similarity_link(lo: float, hi: float) -> str:
        return links.invocation_list_url(**scope, similarity=f"{lo:.2f}-{hi:.2f}")

    def bucket_link(param: str):
        def to(value, x: str, bucket: str) -> str:
            fmt = "%Y-%m-%d %H:%M" if bucket == "hour" else "%Y-%m-%d"
            start = datetime.strptime(x, fmt).replace(tzinfo=timezone.get_current_timezone())
            end = start + (timedelta(hours=1) if bucket == "hour" else timedelta(days=1))
            return links.invocation_list_url(
                **{
                    **scope,
                    "from": links.iso(max(start, filters.start)),
                    "to": links.iso(min(end, filters.end)),
                },
                **{param: value or "none"},
            )

        return to

    level_values = {label: value for value, label in metrics.RELEVANCE_LEVELS}
    dedup_values = {label: value for value, label in metrics.DEDUP_REASONS}
    return {
        "chart-relevance": distribution_figure(
            rows=data["relevance"],
            title=gettext("Relevance level distribution"),
            colours=LEVEL_COLOURS,
            link=by("level"),
        ),
        "chart-dedup": distribution_figure(
            rows=data["dedup"],
            title=gettext("Dedup reason distribution"),
            colours=DEDUP_COLOURS,
            link=by("dedup"),
        ),
        "chart-similarity": similarity_figure(
            histogram=data["similarity"],
            reference=thresholds.reference,
            highly_relevant=thresholds.highly_relevant,
            title=gettext("l1_top_similarity distribution"),
            link=similarity_link,
        ),
        "chart-relevance-time": over_time_figure(
            over_time=data["relevance_over_time"],
            title=gettext("Relevance level per %(bucket)s")
            % {"bucket": BUCKETS.get(filters.bucket, filters.bucket)},
            colours=LEVEL_COLOURS,
            values=level_values,
            link=bucket_link("level"),
        ),
        "chart-dedup-time": over_time_figure(
            over_time=data["dedup_over_time"],
            title=gettext("Dedup reason per %(bucket)s")
            % {"bucket": BUCKETS.get(filters.bucket, filters.bucket)},
            colours=DEDUP_COLOURS,
            values=dedup_values,
            link=bucket_link("dedup"),
        ),
        "chart-sessions": sessions_figure(sessions=data["sessions"], title=gettext("Calls per session")),
        "chart-latency-time": latency_over_time_figure(
            over_time=data["latency_over_time"],
            title=gettext("Latency p50 / p95 per %(bucket)s")
            % {"bucket": BUCKETS.get(filters.bucket, filters.bucket)},
        ),
    }
