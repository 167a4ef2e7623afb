"""pytest setup for the module's tests. In CI (CI=true) a skipped test is a failure that prints the
reason: a skip there means the setup lacks something the README says CI provides (issue 26).
Elsewhere a run whose every test was skipped exits 77, which CTest shows as skipped, not passed."""
import os

import pytest

SKIPPED_ALL = 77  # the tests' SKIP_RETURN_CODE in CTest
_outcomes = set()


def in_ci():
    return os.environ.get("CI", "").lower() in ("true", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI={os.environ['CI']}), which counts as a failure: {reason}"


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes.add(report.outcome)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == pytest.ExitCode.OK and _outcomes == {"skipped"}:
        session.exitstatus = SKIPPED_ALL
