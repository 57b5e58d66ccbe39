"""End to end through the real Dagster webserver: GraphQL only, and headless Chromium + Playwright."""

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.ui_server import ROOT, DagsterServer

pytestmark = pytest.mark.slow

ASSETS = {
    "environment_catalog",
    "trajectories",
    "labeled_steps",
    "step_strata",
    "benchmark_split",
    "sft_mixture",
    "benchmark_dataset",
    "sft_dataset",
    "simulator_eval",
    "environment_report",
    "environment_yield",
}
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ui")
    srv = DagsterServer(tmp / "dagster_home", tmp / "data", tmp / "dagster.log")
    try:
        yield srv.start()
    finally:
        srv.stop()
        assert srv.processes_left() == [], f"processes left behind: {srv.processes_left()}"


#: checks that may fail as a warning on the small profile: a split stratum with fewer candidates than its quota
MAY_WARN = {"benchmark_split:composition_matches", "sft_mixture:mixture_composition"}


@pytest.fixture(scope="module")
def shots() -> Path:
    shots = Path(os.environ.get("ENVSIM_UI_SCREENSHOTS") or tempfile.mkdtemp(prefix="envsim-ui-"))
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {shots}")
    return shots


@pytest.fixture(scope="module")
def page(server):
    """A page of headless Chromium (Debian's, installed by .ci/run) for the module."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is installed by .ci/run")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="chromium-profile-"),
            executable_path=CHROMIUM,
            headless=True,
            viewport={"width": 1600, "height": 1000},
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            ],
        )
        try:
            yield browser.new_page()
        finally:
            browser.close()


@pytest.fixture(scope="module")
def full_run(server, request) -> str:
    """The module's one end-to-end run of every asset, which both its GraphQL and its browser test check (the same
    run twice would double the module's time): launched as a person launches it, with "Materialize all" on the
    asset graph in headless Chromium; where Chromium is missing, through GraphQL's launchRun (what the other
    webserver tests launch with). Returns the run id; the run may still be going."""
    if not Path(CHROMIUM).exists():
        return server.launch_all()
    from playwright.sync_api import expect

    page = request.getfixturevalue("page")
    page.goto(f"{server.url}/asset-groups", wait_until="domcontentloaded")
    button = page.get_by_role("button", name="Materialize all")
    expect(button).to_be_visible(timeout=60_000)
    button.click()
    toast = page.get_by_text(re.compile(r"^Launched run [0-9a-f]{8}$"))
    expect(toast).to_be_visible(timeout=60_000)
    link = page.locator('a[href^="/runs/"]').filter(has_text="View").first
    return link.get_attribute("href").split("/runs/")[1]


def _assert_complete(server, run_id):
    materialized, checks, failures = server.run_events(run_id)
    assert failures == []
    assert ASSETS <= materialized, ASSETS - materialized
    severities = server.check_severities(run_id)
    failed = {k for k, passed in checks.items() if not passed}
    assert len(checks) >= 12 and failed <= MAY_WARN, failed - MAY_WARN
    assert all(severities[k] == "WARN" for k in failed), {k: severities[k] for k in failed}
    return checks


def test_graphql_run_materializes_everything_and_checks_pass(server, full_run):
    """The module's run, read through GraphQL: it succeeds, every asset is materialized, its checks pass (or warn)."""
    status = server.wait_run(full_run)
    assert status == "SUCCESS", f"{status}: {server.run_events(full_run)[2]}\n{server.log_tail()}"
    _assert_complete(server, full_run)


def test_what_a_person_sees(server):
    data = server.graphql("""{ assetNodes { assetKey { path } groupName description }
        repositoriesOrError { ... on RepositoryConnection { nodes { schedules { name scheduleState { id status } }
        sensors { name } } } } }""")
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert ASSETS <= set(nodes)
    assert {n["groupName"] for n in nodes.values()} == {
        "collection",
        "labeling",
        "selection",
        "export",
        "evaluation",
        "simulation",
        "envsimbench",
        "quality",
    }
    assert nodes["benchmark_split"]["description"].startswith("The benchmark split: the EnvSimBench composition")
    repo = data["repositoriesOrError"]["nodes"][0]
    assert [s["name"] for s in repo["schedules"]] == ["weekly_splits"]
    assert sorted(s["name"] for s in repo["sensors"]) == ["curriculum_on_new_eval", "splits_on_new_steps"]
    started = server.graphql(
        """mutation($s: ScheduleSelector!) { startSchedule(scheduleSelector: $s) { __typename
             ... on ScheduleStateResult { scheduleState { status } } } }""",
        {
            "s": {
                "repositoryLocationName": server.location(),
                "repositoryName": "__repository__",
                "scheduleName": "weekly_splits",
            }
        },
    )
    assert started["startSchedule"]["scheduleState"]["status"] == "RUNNING"


def test_browser_materializes_the_pipeline(server, full_run, page, shots):
    """The run "Materialize all" launched (full_run) through a person's eyes: the run page says Success, the asset
    graph, table metadata as real HTML tables, the CM-vs-|Δ| plot."""
    from playwright.sync_api import expect

    page.goto(f"{server.url}/runs/{full_run}", wait_until="domcontentloaded")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible(timeout=600_000)
    page.screenshot(path=str(shots / "run.png"))
    page.goto(f"{server.url}/asset-groups", wait_until="domcontentloaded")
    expect(page.get_by_role("button", name="Materialize all")).to_be_visible(timeout=60_000)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(shots / "asset-graph.png"))
    # tabular summaries are table metadata: a real HTML table with its column headers, no Markdown pipe text
    page.goto(f"{server.url}/assets/labeled_steps", wait_until="domcontentloaded")
    row = page.locator("tr", has_text="delta_by_outcome").first
    expect(row).to_be_visible(timeout=60_000)
    table = row.locator("table").first
    expect(table.locator("th", has_text="delta_size")).to_be_visible(timeout=30_000)
    expect(table.locator("th", has_text="total")).to_be_visible()
    assert table.locator("tbody tr").count() >= 2 and "| " not in row.inner_text()
    page.screenshot(path=str(shots / "labeled-steps.png"), full_page=True)
    page.goto(f"{server.url}/assets/simulator_eval", wait_until="domcontentloaded")
    expect(page.get_by_text("cm_by_delta").first).to_be_visible(timeout=60_000)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(shots / "simulator-eval.png"), full_page=True)
    page.locator("tr", has_text="cm_by_delta").get_by_text("[Show Markdown]").first.click()
    plot = page.locator('img[src^="data:image/png"]').first
    expect(plot).to_be_visible(timeout=30_000)  # the CM-vs-|Δ| plot renders
    page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "eval-plot.png"))
    assert server.wait_run(full_run) == "SUCCESS"
    _assert_complete(server, full_run)
    # one click, one run, and the module's only one: both tests looked at it, neither materialized everything again
    runs = server.graphql("{ runsOrError { ... on Runs { results { runId } } } }")["runsOrError"]["results"]
    assert [r["runId"] for r in runs] == [full_run]
    if os.environ.get("ENVSIM_UPDATE_DOCS"):
        docs = ROOT / "docs"
        docs.mkdir(exist_ok=True)
        shutil.copy(shots / "asset-graph.png", docs / "asset-graph.png")
        shutil.copy(shots / "simulator-eval.png", docs / "simulator-eval.png")
        shutil.copy(shots / "eval-plot.png", docs / "eval-plot.png")
