"""Public API `recbench.schema.read_run`: the run-dir records and reader live in recbench/store/schema.py."""
from recbench.store.schema import (CallRecord, ErrorRecord, PlanResult, RunDir, RunResult, SampleRecord,  # noqa: F401
                                   SchemaError, find_run_dirs, read_run, read_result)
