"""What a study produced, for people (:meth:`Report.to_text`) and for tools (:meth:`Report.to_dict`, files).

A report is the engine's :class:`~stratasim.system_layer.result.SimulationResult` (integer picoseconds), or a
request-level study's :class:`~stratasim.kernel.serving.ServingResult`, plus what the composition root adds: the study's name, the wall time, where each layer ran, a training or inference workload's
figures and the warnings. It copies nothing: :mod:`stratasim.report.json_report` and :mod:`stratasim.report.text_report` render
the result as it is, converting units with :func:`~stratasim.kernel.units.ps_to_ns` and
:func:`~stratasim.kernel.units.format_time_ps` (the JSON field names, a contract tools rely on, are listed there).

Energy is what the compute backend says its operators take: ``compute_energy_pj`` (picojoules) per NPU and
summed over the study, and ``compute_power_w`` (watts), that energy over the study's total time — the mean
power of the compute, per NPU or of all NPUs together (1 pJ per ps is 1 W). Both are 0 without priced operators.
When the study gives the network an energy per bit, ``network_energy_pj`` prices the bits the NPUs sent, and
``energy_pj`` and ``power_w`` are compute and network together: a training study's energy per iteration.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.kernel.errors import StrataSimError
from stratasim.report.chrome_trace import write_chrome_trace
from stratasim.report.contents import ReportContents
from stratasim.report.json_report import report_dict, write_report
from stratasim.report.text_report import report_text

__all__ = ["Report"]


@dataclass(frozen=True)
class Report(ReportContents):
    """One study's results (its fields and figures are :class:`~stratasim.report.contents.ReportContents`'s), as
    JSON, text, a table or files."""

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (lists, not tuples); the trace spans are left out."""
        return report_dict(self)

    def to_json(self) -> str:
        """The report as ``report.json`` holds it (the text of :meth:`to_dict`, written without building a dict
        per collective)."""
        text = io.StringIO()
        write_report(text, self)
        return text.getvalue()

    def to_dataframe(self, table: str = "per_npu") -> Any:
        """One of the report's tables as a pandas DataFrame (``per_npu``, ``collectives``, ``operators`` or
        ``links``; nested fields become dotted columns). pandas is not a dependency: install it to use this."""
        tables = ("per_npu", "collectives", "operators", "links")
        if table not in tables:
            raise StrataSimError(f"no table {table!r} in a report; expected one of {', '.join(tables)}")
        try:
            import pandas
        except ImportError:
            raise StrataSimError("Report.to_dataframe needs pandas: pip install pandas") from None
        return pandas.json_normalize(self.to_dict().get(table, []))

    def to_text(self) -> str:
        """A readable summary: headline numbers, the collectives grouped by kind and communicator, the NPUs."""
        return report_text(self)

    def write(self, out_dir: str | Path, *, trace: bool = True) -> tuple[Path, ...]:
        """Write ``report.json`` and, with ``trace``, ``trace.json`` (the Chrome trace of the result's spans,
        counters and link busy stretches, streamed event by event, with a ``layers`` track when the report has its
        per-layer breakdown, a serving study's when its run recorded a trace) into ``out_dir``; the paths written."""
        out = Path(out_dir)
        report_path, trace_path = out / "report.json", out / "trace.json"
        result, engine = self.result, self.engine
        try:
            out.mkdir(parents=True, exist_ok=True)
            with report_path.open("w", encoding="utf-8", buffering=1 << 20) as file:
                write_report(file, self)
            if not trace:
                return (report_path,)
            with trace_path.open("w", encoding="utf-8", buffering=1 << 20) as file:
                if engine is None:
                    write_chrome_trace(file, self.serving_layer_spans, result.counters, (), result.npus, None)
                else:
                    write_chrome_trace(
                        file,
                        engine.spans,
                        engine.counters,
                        engine.link_busy,
                        engine.npus,
                        engine.stands_for(),
                        layers=bool(self.layers),
                    )
        except OSError as exc:
            raise StrataSimError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
        return report_path, trace_path
