"""`bringup exporter`'s metrics: the fleet's snapshots as Prometheus metric families, read at scrape time
(collector.py). A headless front end beside the console: it never imports Textual. The command: tui/cli/exporter.py.
"""
