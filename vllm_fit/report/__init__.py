"""The report of one search: typed records (search_report.py) and how a study becomes one (build.py)."""
