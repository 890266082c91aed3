"""Walks the service through a client generated from openapi/openapi.json:
register -> login -> target -> scan -> scan detail -> dashboard, then a
checkout through the dev payment stand-in (the api's own checkout page) to
the monthly tier, then the scan's report in all five formats (a paid
feature, hence after the checkout), each through its own operation. Every
response must parse into the generated models (text, a model or bytes);
any failure exits non-zero."""

import csv
import io
import sys
import urllib.parse
import urllib.request
import uuid

from scanfleet_client import AuthenticatedClient, Client
from scanfleet_client.api.auth import get_me, login, register
from scanfleet_client.api.dashboard import get_dashboard_charts, get_dashboard_summary
from scanfleet_client.api.scans import (
    create_scan,
    get_scan,
    get_scan_report,
    get_scan_report_csv,
    get_scan_report_html,
    get_scan_report_json,
    get_scan_report_pdf,
    get_scan_report_sarif,
    list_scans,
)
from scanfleet_client.api.subscriptions import create_checkout, get_current_subscription
from scanfleet_client.api.targets import create_target, list_targets
from scanfleet_client.models import JsonReport, LoginRequest, RegisterRequest, SarifLog, ScanCreate, TargetCreate, TierChoice, TierChoiceTierSlug
from scanfleet_client.types import File


def expect(response, status, what):
    if response.status_code != status or response.parsed is None:
        sys.exit(f"{what}: expected {status} with a parsed body, got {response.status_code}: {response.content!r}")
    return response.parsed


def main(base):
    email = f"walk-{uuid.uuid4().hex[:12]}@example.com"
    password = "walk-the-contract-1"
    anon = Client(base_url=base, raise_on_unexpected_status=True)
    user = expect(register.sync_detailed(client=anon, body=RegisterRequest(email=email, password=password, full_name="Walker")), 201, "register")
    assert user.email == email and user.tier_slug == "demo"
    tokens = expect(login.sync_detailed(client=anon, body=LoginRequest(email=email, password=password)), 200, "login")
    client = AuthenticatedClient(base_url=base, token=tokens.access_token, raise_on_unexpected_status=True)
    me = expect(get_me.sync_detailed(client=client), 200, "me")
    assert str(me.id) == str(user.id)

    target = expect(create_target.sync_detailed(client=client, body=TargetCreate(domain="Walk.Example.COM", organization="Walkers")), 201, "create target")
    assert target.domain == "walk.example.com", target.domain
    targets = expect(list_targets.sync_detailed(client=client), 200, "list targets")
    assert [str(t.id) for t in targets] == [str(target.id)]

    scan = expect(create_scan.sync_detailed(client=client, body=ScanCreate(target_id=target.id)), 201, "create scan")
    assert scan.status == "queued" and scan.engine == "full", (scan.status, scan.engine)
    detail = expect(get_scan.sync_detailed(client=client, scan_id=scan.id), 200, "scan detail")
    assert detail.domain == "walk.example.com" and detail.summary.total_findings == 0
    scans = expect(list_scans.sync_detailed(client=client), 200, "list scans")
    assert len(scans) == 1

    summary = expect(get_dashboard_summary.sync_detailed(client=client), 200, "dashboard summary")
    assert summary.total_targets == 1 and summary.total_scans == 1, summary
    assert summary.recent_scans[0].target_domain == "walk.example.com"
    charts = expect(get_dashboard_charts.sync_detailed(client=client), 200, "dashboard charts")
    assert sum(day.scans for day in charts) == 1

    session = expect(create_checkout.sync_detailed(client=client, body=TierChoice(tier_slug=TierChoiceTierSlug.MONTHLY)), 200, "checkout")
    page = urllib.parse.urlsplit(session.checkout_url).path
    assert page.startswith("/api/v1/subscriptions/dev-checkout/"), session.checkout_url
    with urllib.request.urlopen(urllib.request.Request(base + page + "/complete", data=b"", method="POST")) as resp:
        assert resp.status == 200, resp.status
    current = expect(get_current_subscription.sync_detailed(client=client), 200, "current subscription")
    assert current.tier_slug == "monthly" and current.status == "active", current

    download_reports(client, scan.id)
    print("generated-client walk: register -> login -> target -> scan -> detail -> dashboard -> checkout -> monthly"
          " -> report in html, csv, json, sarif, pdf: ok")


def download_reports(client, scan_id):
    """The report of the walk's scan in every format. No scanner node runs in
    the contract check, so the scan is still queued: the service answers any
    scan with the report of what is known so far, marked partial, which is
    what is checked here (no findings yet)."""
    html = expect(get_scan_report_html.sync_detailed(client=client, scan_id=scan_id), 200, "html report")
    assert isinstance(html, str) and html.startswith("<!DOCTYPE html>"), html[:80]
    assert "walk.example.com" in html

    text = expect(get_scan_report_csv.sync_detailed(client=client, scan_id=scan_id), 200, "csv report")
    assert isinstance(text, str), type(text)
    rows = list(csv.reader(io.StringIO(text)))
    assert "severity" in rows[0] and len(rows) == 1, rows

    report = expect(get_scan_report_json.sync_detailed(client=client, scan_id=scan_id), 200, "json report")
    assert isinstance(report, JsonReport), type(report)
    assert str(report.scan_id) == str(scan_id) and report.domain == "walk.example.com", report
    assert report.partial is True and report.vulnerabilities == [], report

    sarif = expect(get_scan_report_sarif.sync_detailed(client=client, scan_id=scan_id), 200, "sarif report")
    assert isinstance(sarif, SarifLog), type(sarif)
    assert sarif.version == "2.1.0" and len(sarif.runs) == 1, sarif
    run = sarif.runs[0]
    assert run.tool.driver.name == "scanfleet-templates" and run.results == [], run
    assert str(run.properties.scan_id) == str(scan_id) and run.properties.partial is True, run.properties
    assert run.invocations[0].execution_successful is False, run.invocations

    pdf = expect(get_scan_report_pdf.sync_detailed(client=client, scan_id=scan_id), 200, "pdf report")
    assert isinstance(pdf, File), type(pdf)
    assert pdf.payload.read().startswith(b"%PDF-"), "not a PDF"

    # The `?format=` operation hands its body over as sent.
    page = get_scan_report.sync_detailed(client=client, scan_id=scan_id)
    assert page.status_code == 200 and page.content.startswith(b"<!DOCTYPE html>"), page.content[:80]


if __name__ == "__main__":
    main(sys.argv[1])
