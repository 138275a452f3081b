"""What operators see and do: status and ETA (`stats`), Prometheus metrics, the progress
bar, the crawl-level operations (start, pause, resume, cancel, purge: `control`), and the
records of a crawl and their export (`sinks`).
"""
