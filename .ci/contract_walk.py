"""Walks the service through a client generated from openapi/openapi.json:
register -> login -> target -> scan -> scan detail -> dashboard, then a
checkout through the dev payment stand-in (the api's own checkout page) to
the monthly tier. Every response must parse into the generated models; any
failure exits non-zero."""

import sys
import urllib.parse
import urllib.request
import uuid

from scanfleet_client import AuthenticatedClient, Client
from scanfleet_client.api.auth import get_me, login, register
from scanfleet_client.api.dashboard import get_dashboard_charts, get_dashboard_summary
from scanfleet_client.api.scans import create_scan, get_scan, list_scans
from scanfleet_client.api.subscriptions import create_checkout, get_current_subscription
from scanfleet_client.api.targets import create_target, list_targets
from scanfleet_client.models import LoginRequest, RegisterRequest, ScanCreate, TargetCreate, TierChoice, TierChoiceTierSlug


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
    print("generated-client walk: register -> login -> target -> scan -> detail -> dashboard -> checkout -> monthly: ok")


if __name__ == "__main__":
    main(sys.argv[1])
