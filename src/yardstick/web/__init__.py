"""Pages: a run folder's report (report.html, episodes.csv), and the platform's pages (home, boards, run pages
and replays, sign-in approval, checkout), served by the gateway."""

from yardstick.web.charts import success_chart_svg
from yardstick.web.run_folder import episodes_csv, render_report_html, write_run_folder

__all__ = ["episodes_csv", "render_report_html", "success_chart_svg", "write_run_folder"]
