"""Pages: the run folder's report (and, later, the gateway's pages)."""

from yardstick.web.charts import success_chart_svg
from yardstick.web.report import episodes_csv, render_report_html, write_run_folder

__all__ = ["episodes_csv", "render_report_html", "success_chart_svg", "write_run_folder"]
