"""Reporting: the table model, results.md/.csv/.json, plots, report.html, merged tables and the Rosetta pages. It reads
only the records and verdict files of results folders (runner/run_folder.py) and the stored notebooks, and imports
nothing from runner/run/ or runner/checks/ (tests/test_imports.py holds that)."""
