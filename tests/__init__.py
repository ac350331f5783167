"""hpo's tests, laid out as the code is: tests/run/test_summary.py tests hpo/run/summary.py,
tests/test_storage_url.py tests hpo/storage_url.py, tests/bench/ tests bench/. Whole-project
checks (docs, style, layers, demo, security, bad input, reliability) are in tests/project/; what
several test files share (helpers, the shared storage, the CLI studies, finalize's summaries) is
in tests/support/. Every folder is a package, so two files may share a name."""
