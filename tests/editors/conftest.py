import pytest


@pytest.fixture(scope="session")
def vsix():
    """The freshly built .vsix (PERFLSP_VSIX, or built now from vscode-extension/)."""
    from tests.editors.vscode_driver import build_vsix

    return build_vsix()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed VS Code step leaves a screenshot of what the browser showed."""
    outcome = yield
    report = outcome.get_result()
    session = item.funcargs.get("session") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and session is not None:
        from playwright.sync_api import Error as PlaywrightError

        try:
            session[0].screenshot(f"failed-{item.name}")
        except PlaywrightError as exc:  # the browser may be gone; the failure itself is what matters
            print(f"no failure screenshot: {exc}")
