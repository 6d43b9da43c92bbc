"""The picture of a search: KV capacity (tokens) against the memory knob, from its report.

`plot_data` is pure (the report in, the points and lines out); `render` draws them with matplotlib,
an optional extra (`pip install vllm-fit[plot]`) imported only here and only when drawing.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import EnvironmentProblem, one_line
from ..outcome import CapacityFacts
from ..report.search_report import SearchReport
from ..report.sections import FitSummary
from ..trial.record import TrialRecord

GIB = float(1 << 30)
FORMATS = (".svg", ".png", ".pdf")
COLOURS = {"ok": "#2ca02c", "kv_too_small": "#ff7f0e", "oom": "#d62728", "request_failed": "#9467bd",
           "no_kv_memory": "#8c564b", "free_memory_short": "#e377c2", "timeout": "#7f7f7f"}
OTHER_COLOUR = "#17becf"


@dataclass(frozen=True)
class Point:
    """One trial: the knob it ran at, the capacity it measured (or the length it failed at)."""

    x: float
    y: float
    outcome: str
    measured: bool
    """True: y is the KV capacity vLLM reported; False: y is the length the trial asked for."""
    index: int


@dataclass
class PlotData:
    """Everything the picture shows, in the report's own numbers."""

    knob: str
    """gpu_memory_utilization or kv_cache_memory_bytes (x in GiB then)."""
    points: List[Point] = field(default_factory=list)
    line: Optional[Tuple[float, float]] = None
    """(slope, intercept) of the capacity model, tokens per unit of x."""
    cap: Optional[float] = None
    fit: Optional[Tuple[float, float]] = None
    model_max: Optional[int] = None
    concurrency: List[Tuple[int, int]] = field(default_factory=list)
    """(sequences, tokens): the capacity n sequences of the fit's length need."""
    fit_len: Optional[int] = None
    alternatives: List[Tuple[str, float, float]] = field(default_factory=list)
    """--explore's verified fits: (the change, x, KV tokens), on the same knob."""
    unit: str = "GiB"
    """The unit of x for KV sizes: MiB when every size is under 1 GiB."""

    def xs(self) -> List[float]:
        """Every x the picture shows."""
        return [p.x for p in self.points] + ([self.fit[0]] if self.fit else []) + \
            ([self.cap] if self.cap else []) + [a[1] for a in self.alternatives]


def in_mib(data: PlotData) -> PlotData:
    """KV sizes in MiB (x 1024) when they are all under 1 GiB: a readable axis for small pools."""
    if data.knob != "kv_cache_memory_bytes" or not data.xs() or max(data.xs()) >= 1:
        return data
    return dataclasses.replace(
        data, unit="MiB", points=[dataclasses.replace(p, x=p.x * 1024) for p in data.points],
        line=(data.line[0] / 1024, data.line[1]) if data.line else None,
        fit=(data.fit[0] * 1024, data.fit[1]) if data.fit else None,
        alternatives=[(name, x * 1024, tokens) for name, x, tokens in data.alternatives])


def _capacity(facts: CapacityFacts) -> Optional[float]:
    if facts.kv_cache_tokens:
        return float(facts.kv_cache_tokens)
    if facts.num_blocks and facts.block_size:
        return float(facts.num_blocks * facts.block_size)
    if facts.estimated_max_len:
        return float(facts.estimated_max_len)
    return None


def _x(trial: TrialRecord, knob: str) -> Optional[float]:
    args, facts = trial.llm_kwargs, trial.facts
    if knob == "kv_cache_memory_bytes":
        value = args.get("kv_cache_memory_bytes")
        return float(value) / GIB if value is not None else None
    value = args.get("gpu_memory_utilization", facts.gpu_memory_utilization)
    return float(value) if value is not None else None


def plot_data(report: SearchReport) -> PlotData:
    """The points, the capacity line, the cap, the fit, the model's maximum and concurrency levels."""
    trials = report.trials
    by_kv = any(t.llm_kwargs.get("kv_cache_memory_bytes") is not None for t in trials)
    data = PlotData("kv_cache_memory_bytes" if by_kv else "gpu_memory_utilization")
    for trial in trials:
        x = _x(trial, data.knob)
        capacity = _capacity(trial.facts)
        length = trial.length
        if x is None or (capacity is None and not length):
            continue
        y = capacity if capacity is not None else float(length or 0)
        data.points.append(Point(x, y, trial.outcome.value, capacity is not None, trial.index))
    data.line = _line(data, trials)
    data.alternatives = [("%s, fit %s" % (row.alternative, row.fit.max_model_len), *point)
                         for row in report.explore or () if row.fit is not None
                         for point in [_fit_point(row.fit, data.knob)] if point is not None]
    data.cap = report.search.utilization_cap if data.knob == "gpu_memory_utilization" else None
    data.model_max = report.search.model_derived_max_len
    point = _fit_point(report.fit, data.knob)
    if report.fit is not None and point is not None:
        data.fit, data.fit_len = point, report.fit.max_model_len
        data.concurrency = [(n, n * data.fit_len) for n in (1, 2, 4, 8)]
    return data


def _fit_point(fit: Optional[FitSummary], knob: str) -> Optional[Tuple[float, float]]:
    """(x, KV tokens) of a fit on this knob; None without one."""
    if fit is None or not fit.max_model_len:
        return None
    args = fit.engine_args
    kv = args.get("kv_cache_memory_bytes")
    x = kv / GIB if knob == "kv_cache_memory_bytes" and kv is not None else args.get("gpu_memory_utilization")
    return None if x is None else (float(x), float(fit.kv_cache_tokens or fit.max_model_len))


def _line(data: PlotData, trials: Sequence[TrialRecord]) -> Optional[Tuple[float, float]]:
    """Least squares through the measured points; one point and the device total give the slope."""
    measured = [(p.x, p.y) for p in data.points if p.measured]
    xs = {x for x, _ in measured}
    if len(xs) >= 2:
        n = len(measured)
        mean_x, mean_y = sum(x for x, _ in measured) / n, sum(y for _, y in measured) / n
        sxx = sum((x - mean_x) ** 2 for x, _ in measured)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in measured) / sxx
        return slope, mean_y - slope * mean_x
    if not measured:
        return None
    x0, y0 = measured[-1]
    if data.knob == "kv_cache_memory_bytes":
        return (y0 / x0, 0.0) if x0 else None
    facts = next((t.facts for t in trials if t.facts.available_kv_gib and t.facts.total_memory_gib), None)
    if facts is None or not facts.available_kv_gib or not facts.total_memory_gib:
        return None
    slope = y0 / facts.available_kv_gib * facts.total_memory_gib  # tokens per unit of utilization
    return slope, y0 - slope * x0


def render(report: SearchReport, fmt: str = ".svg", title: Optional[str] = None) -> bytes:
    """The picture as bytes in `fmt` (.svg, .png or .pdf)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise EnvironmentProblem("drawing needs matplotlib: pip install 'vllm-fit[plot]'") from None
    data = in_mib(plot_data(report))
    figure, axes = pyplot.subplots(figsize=(8, 5))
    try:
        _draw(axes, data)
        axes.set_title(one_line(title or report.search.model or "vllm-fit search", 120), fontsize=10)
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt.lstrip("."), bbox_inches="tight",
                       metadata={"Date": None} if fmt == ".svg" else None)
        return buffer.getvalue()
    finally:
        pyplot.close(figure)


def _draw(axes: Any, data: PlotData) -> None:
    seen: Dict[str, bool] = {}
    for point in data.points:
        colour = COLOURS.get(point.outcome, OTHER_COLOUR)
        label = point.outcome if point.outcome not in seen else None
        seen[point.outcome] = True
        axes.scatter([point.x], [point.y], color=colour, marker="o" if point.measured else "x", s=40,
                     label=label, zorder=3)
        axes.annotate(str(point.index), (point.x, point.y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    xs = data.xs()
    if data.line and xs:
        low, high = min(xs), max(xs)
        pad = (high - low) * 0.1 or high * 0.25 or 0.02
        low = max(0.0, low - pad)  # no memory below zero
        high += pad
        axes.plot([low, high], [data.line[0] * low + data.line[1], data.line[0] * high + data.line[1]],
                  color="#1f77b4", linestyle="--", linewidth=1, label="capacity model")
    if data.cap is not None:
        axes.axvline(data.cap, color="#444444", linestyle=":", linewidth=1, label="cap %.2f" % data.cap)
    if data.fit:
        axes.scatter([data.fit[0]], [data.fit[1]], marker="*", s=220, color="gold", edgecolors="black",
                     zorder=4, label="fit %s tokens" % data.fit_len)
    for name, x, tokens in data.alternatives:
        axes.scatter([x], [tokens], marker="D", s=60, color="#9467bd", edgecolors="black", zorder=4)
        axes.annotate("explore: %s" % name, (x, tokens), textcoords="offset points", xytext=(6, -10), fontsize=7)
    top = max([p.y for p in data.points] + ([data.fit[1]] if data.fit else []) + [a[2] for a in data.alternatives]
              + [1.0])
    if data.model_max and data.model_max <= top * 1.5:
        axes.axhline(data.model_max, color="#000000", linewidth=0.8, label="model maximum %d" % data.model_max)
    for n, tokens in data.concurrency[1:]:
        if tokens <= top * 1.2:
            axes.axhline(tokens, color="#aaaaaa", linewidth=0.6, linestyle="-.")
            axes.annotate("%d x fit length" % n, (axes.get_xlim()[0], tokens), fontsize=7, color="#666666")
    axes.set_xlabel("gpu_memory_utilization" if data.knob == "gpu_memory_utilization"
                    else "kv_cache_memory_bytes (%s)" % data.unit)
    axes.set_ylabel("KV capacity (tokens); x: the length a failed trial asked for")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="best")
