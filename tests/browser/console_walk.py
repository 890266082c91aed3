#!/usr/bin/env python3
"""The web console's walk in headless Chromium (issue 33, Tests).

Drives Debian's Chromium with Playwright for Python against a running api
whose nodes scan the lab (tests/src/lab.rs): register, sign in, add the lab
target, start a full scan and watch its progress bar reach 100 without a
reload, open a finding, mark two findings false positive in one request,
rescan and see them still false positive and the scan's changes; then the
sign-in and the triage again by keyboard alone. Screenshots of every main
screen in light and dark (and at 375 px wide) go to --screens; axe-core runs
on every main screen in both schemes and any violation of impact serious or
critical fails the walk.

Every element is found by its role and accessible name, or by its label: the
names the issue lists are the contract between these pages and their users
(and this test). Exit status 0 when every check passed, 1 otherwise; the last
line printed is the summary. `tests/tests/console_browser.rs` runs it against
a fleet it boots; by hand:

    python3 tests/browser/console_walk.py --base http://127.0.0.1:8000 \\
        --domain shop.example.test --screens /tmp/screens \\
        --axe tests/browser/.cache/node_modules/axe-core/axe.min.js
"""

import argparse
import json
import os
import re
import signal
import sys
import time
import traceback
import uuid
from urllib.parse import urlsplit

from playwright.sync_api import expect, sync_playwright

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
PASSWORD = "correct-horse-battery-staple"
FULL_NAME = "Walk Tester"
# Findings of the lab (tests/src/lab.rs) by their templates' names: on every
# host, both stay across rescans; the Git one goes when the harness switches
# the lab's Git configuration off before the rescan.
MARKED_BY_MOUSE = "X-Powered-By header discloses the application stack"
MARKED_BY_KEYBOARD = "Express (Node.js) detected"
GIT = "Git repository configuration exposed"
FALSE_POSITIVE = re.compile(r"false[\s_-]?positive", re.I)
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
# What the issue allows a page's first load to transfer.
PAGE_BUDGET = 200 * 1024
# Screens visited signed in, in order; those with a navigation link are
# reached through it.
NAV_SCREENS = ["Dashboard", "Targets", "Scans", "Schedules", "Notifications", "Webhooks", "Account"]


class StepFailed(Exception):
    """A step the rest of its phase depends on did not happen."""


def log(msg):
    print(f"console_walk: {msg}", flush=True)


def first_lines(text, n=6):
    return "\n    ".join(str(text).strip().splitlines()[:n])


def word(text):
    """A pattern for a name holding `text` as a whole word or host."""
    return re.compile(rf"(?<![\w.-]){re.escape(text)}(?![\w.-])", re.I)


class Walk:
    def __init__(self, args, playwright):
        self.args = args
        self.base = args.base.rstrip("/")
        self.origin = "{0.scheme}://{0.netloc}".format(urlsplit(self.base))
        self.domain = args.domain
        self.hosts = [args.domain, f"api.{args.domain}"]
        self.email = f"walk-{uuid.uuid4().hex[:12]}@example.com"
        self.axe_source = open(args.axe, encoding="utf-8").read()
        self.browser = playwright.chromium.launch(
            executable_path=args.chromium, args=CHROMIUM_ARGS
        )
        expect.set_options(timeout=15_000)
        self.checks = 0
        self.failures = []
        self.notes = []
        self.screens = []
        self.axe = {}  # (screen, scheme) -> {impact: count}
        self.axe_serious = []
        self.weights = {}  # screen -> bytes
        self.screen_urls = {}  # screen -> address, from the first visit
        self.background = {}  # scheme -> rgb of the dashboard
        self.target_url = None
        self.scan_urls = []
        self.finding_url = None
        self.page = None  # the page a failure screenshot is taken of
        self.seen_events = set()  # failures seen on pages, each told once
        os.makedirs(args.screens, exist_ok=True)

    # -- bookkeeping -------------------------------------------------------

    def check(self, ok, what):
        self.checks += 1
        if ok:
            log(f"ok   {what}")
        else:
            log(f"FAIL {what}")
            self.failures.append(what)
        return ok

    def need(self, ok, what):
        if not self.check(ok, what):
            raise StepFailed(what)

    def note(self, what):
        log(f"note {what}")
        self.notes.append(what)

    def phase(self, name, fn):
        log(f"== {name}")
        started = time.monotonic()
        try:
            fn()
        except StepFailed as e:
            self._failure_shot(name)
            log(f"phase '{name}' stopped at: {e}")
        except Exception as e:  # noqa: BLE001 - every error ends the phase, not the walk
            self.checks += 1
            what = f"{name}: {type(e).__name__}: {first_lines(e)}"
            log(f"FAIL {what}")
            self.failures.append(what)
            if self.args.verbose:
                traceback.print_exc()
            self._failure_shot(name)
        log(f"== {name}: {time.monotonic() - started:.1f} s")

    def _failure_shot(self, name):
        if self.page is None or self.page.is_closed():
            return
        path = os.path.join(self.args.screens, f"failure-{slug(name)}.png")
        try:
            self.page.screenshot(path=path, full_page=True)
            log(f"     at {self.page.url}; screenshot {path}")
            alerts = self.page.get_by_role("alert").all_inner_texts()
            if alerts:
                log(f"     alerts on the page: {alerts}")
            invalid = self.page.evaluate(
                """() => [...document.querySelectorAll('[aria-invalid=true]')].map(el =>
                    (el.labels && el.labels[0] ? el.labels[0].innerText : el.name) + ': ' +
                    (el.getAttribute('aria-describedby') || '').split(' ')
                        .map(id => (document.getElementById(id) || {}).innerText || '').join(' '))"""
            )
            if invalid:
                log(f"     invalid fields: {invalid}")
        except Exception:  # noqa: BLE001 - best effort
            pass

    # -- contexts ----------------------------------------------------------

    def context(self, scheme="light", bypass_csp=False, viewport=DESKTOP):
        ctx = self.browser.new_context(
            base_url=self.base,
            color_scheme=scheme,
            bypass_csp=bypass_csp,
            viewport=viewport,
        )
        ctx.set_default_timeout(15_000)
        ctx.on("page", self._watch)
        return ctx

    def _watch(self, page):
        """Fails on a request to another origin, a CSP refusal or a script
        error, on any page of any context."""

        def once(what):
            key = re.sub(UUID, "{id}", what)
            if key not in self.seen_events:
                self.seen_events.add(key)
                self.check(False, what)

        def on_response(resp):
            # A console page must never meet the API's rate limit or fail.
            if resp.status == 429 or resp.status >= 500:
                once(f"no {resp.status} answer (saw {resp.request.method} {resp.url})")

        def on_request(req):
            url = req.url
            if url.startswith(("data:", "blob:", "about:")):
                return
            origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
            ws_origin = origin.replace("ws://", "http://").replace("wss://", "https://")
            if ws_origin != self.origin:
                once(f"no request leaves the origin (saw {url})")

        def on_console(msg):
            if msg.type == "error" and "Content Security Policy" in msg.text:
                once(f"no CSP refusal on {page.url}: {first_lines(msg.text, 2)}")

        def on_error(err):
            once(f"no script error on {page.url}: {first_lines(err, 2)}")

        page.on("request", on_request)
        page.on("console", on_console)
        page.on("response", on_response)
        page.on("pageerror", on_error)

    # -- the page's contract: roles and names --------------------------------

    @staticmethod
    def nav(page, name):
        """A navigation link by its name; what follows the name (the unread
        badge of Notifications, "Notifications 2 unread") is let be."""
        named = re.compile(rf"^\s*{re.escape(name)}\b")
        return page.get_by_role("navigation").get_by_role("link", name=named).first

    @staticmethod
    def button(page, name):
        return page.get_by_role("button", name=name, exact=True)

    @staticmethod
    def field(page, label):
        return page.get_by_label(label, exact=True)

    def finding_box(self, page, name, host):
        """A finding row's checkbox, named "<finding name> on <host>" (the host
        with or without its scheme)."""
        # Slashes escaped: the pattern travels to the page inside a selector.
        pattern = rf"^\s*{re.escape(name)} on (?:https?:\/\/)?{re.escape(host)}\/?\s*$"
        return page.get_by_role("checkbox", name=re.compile(pattern))

    def finding_row(self, page, name, host):
        return page.get_by_role("row").filter(has=self.finding_box(page, name, host))

    @staticmethod
    def row_status(row):
        """The status a row shows: the chosen option of its status control
        when it has one (a select lists every status), else its text."""
        return row.evaluate(
            """row => {
                const sel = row.querySelector('select');
                if (sel && sel.selectedOptions.length)
                    return sel.selectedOptions[0].textContent + ' ' + sel.value;
                return row.innerText;
            }"""
        )

    def shot(self, page, name):
        path = os.path.join(self.args.screens, f"{name}.png")
        page.screenshot(path=path, full_page=True)
        self.screens.append(path)

    # -- steps ----------------------------------------------------------------

    def expect_signed_in(self, page):
        expect(self.nav(page, "Dashboard")).to_be_visible()

    def sign_in_by_mouse(self, page):
        page.goto("/")
        expect(self.button(page, "Sign in")).to_be_visible()
        self.field(page, "Email").fill(self.email)
        self.field(page, "Password").fill(PASSWORD)
        self.button(page, "Sign in").click()
        self.expect_signed_in(page)

    def target_link(self, page):
        """The targets list's link to the walk's target (by its name; by its
        address too where the list holds others of the same name)."""
        links = page.get_by_role("link", name=word(self.domain))
        expect(links.first).to_be_visible()
        if self.target_url and links.count() > 1:
            path = urlsplit(self.target_url).path
            for i in range(links.count()):
                if urlsplit(links.nth(i).get_attribute("href") or "").path == path:
                    return links.nth(i)
        return links.first

    def open_target(self, page):
        """The target's page, through the navigation and the targets list."""
        self.follow_nav(page, "Targets")
        self.target_link(page).click()
        page.wait_for_url(re.compile(rf"/targets/{UUID}"))

    def engine_choice(self, page):
        radio = page.locator('input[type="radio"][value="full"]')
        select = page.locator('select:has(option[value="full"])')
        return radio, select

    def start_full_scan(self, page):
        radio, select = self.engine_choice(page)
        if radio.count() + select.count() == 0:
            # The target's page links (or opens) the scan form.
            opener = page.get_by_role("link", name="Start scan", exact=True).or_(
                self.button(page, "Start scan")
            )
            self.need(opener.count() > 0, "the target's page offers Start scan")
            opener.first.click()
            expect(radio.or_(select).first).to_be_attached()
        if radio.count():
            radio.first.check()
            how = "radio"
        else:
            select.first.select_option("full")
            how = "select"
        self.check(True, f"the engine `full` is chosen ({how})")
        before = page.url
        self.button(page, "Start scan").click()
        page.wait_for_url(re.compile(rf"/scans/{UUID}"))
        self.need(page.url != before, "Start scan leads to the scan's live page")
        self.scan_urls.append(page.url)
        log(f"     scan at {page.url}")

    def watch_to_the_end(self, page, shot_running=None):
        """Follows the live page's progress bar to 100 without a reload."""
        bar = page.get_by_role("progressbar").first
        expect(bar).to_be_attached()
        page.evaluate("window.__marker = 1")
        loads = []

        def on_load(p):
            loads.append(p.url)

        page.on("load", on_load)
        seen = []
        stop_seen = False
        deadline = time.monotonic() + self.args.scan_timeout
        while time.monotonic() < deadline:
            raw = bar.get_attribute("aria-valuenow", timeout=5_000)
            try:
                value = float(raw)
            except (TypeError, ValueError):
                self.need(False, f"the progress bar's aria-valuenow is a number (got {raw!r})")
            if not seen or seen[-1] != value:
                seen.append(value)
            if not stop_seen and 0 < value < 100:
                stop_seen = self.button(page, "Stop scan").is_visible()
            if shot_running and 0 < value < 100:
                self.shot(page, shot_running)
                shot_running = None
            if value >= 100:
                break
            time.sleep(0.2)
        log(f"     aria-valuenow went {' -> '.join(f'{v:g}' for v in seen)}")
        self.check(seen and seen[-1] == 100, "the progress bar reaches 100")
        self.check(
            all(a <= b for a, b in zip(seen, seen[1:])), "the progress bar never goes back"
        )
        if len(seen) == 1:
            self.note("the scan was at 100 when its live page opened: nothing to watch")
        elif any(0 < v < 100 for v in seen):
            self.check(stop_seen, "the running scan's page has the button Stop scan")
        self.check(
            page.evaluate("window.__marker") == 1 and not loads,
            "the live page got there without a reload or navigation",
        )
        page.remove_listener("load", on_load)
        maximum = bar.get_attribute("aria-valuemax")
        self.check(maximum in (None, "100"), f"the bar's aria-valuemax is 100 (got {maximum!r})")

    def target_page_names(self, page):
        """The issue's names for the target page's controls."""
        for name in ["Verify", "Start scan", "Mark false positive", "Accept risk", "Reopen"]:
            self.check(self.button(page, name).count() > 0, f"the target's page has the button {name}")
        # Export: a button, or links per format ("Export CSV"); either is let be.
        export = re.compile(r"^\s*Export\b")
        found = page.get_by_role("button", name=export).or_(page.get_by_role("link", name=export))
        self.check(found.count() > 0, "the target's page has Export")

    def mark_false_positive(self, page, name, keyboard):
        """Selects the two rows of `name` and marks them in one request."""
        rows = [self.finding_row(page, name, h) for h in self.hosts]
        for host, row in zip(self.hosts, rows):
            expect(row, f"the row of {name} on {host}").to_have_count(1)
            self.check(
                not FALSE_POSITIVE.search(self.row_status(row)),
                f"{name} on {host} is not yet false positive (so the check below tells)",
            )
        writes = []

        def on_request(req):
            if req.method not in ("GET", "HEAD", "OPTIONS"):
                writes.append(f"{req.method} {req.url}")

        for host in self.hosts:
            box = self.finding_box(page, name, host)
            if keyboard:
                self.tab_to(page, box, f"the checkbox '{name} on {host}'")
                page.keyboard.press("Space")
            else:
                box.check()
            expect(box).to_be_checked()
        page.on("request", on_request)
        action = self.button(page, "Mark false positive")
        if keyboard:
            self.tab_to(page, action, "the button Mark false positive")
            page.keyboard.press("Enter")
        else:
            action.click()
        for host in self.hosts:
            row = self.finding_row(page, name, host)
            self.check(
                self.wait_for(lambda: FALSE_POSITIVE.search(self.row_status(row)), 15),
                f"{name} on {host} shows false positive",
            )
        page.remove_listener("request", on_request)
        self.check(
            len(writes) == 1,
            f"Mark false positive on two rows is one request (saw {writes})",
        )

    def check_false_positive_after_reload(self, page, name):
        page.goto(self.target_url)
        page.reload()
        missing = []
        for host in self.hosts:
            row = self.finding_row(page, name, host)
            if row.count() == 0:
                missing.append(host)
                continue
            self.check(
                FALSE_POSITIVE.search(self.row_status(row)),
                f"{name} on {host} is still false positive after the rescan",
            )
        if missing:
            self.note(f"the target page's default view hides {name} on {missing}: checked the filter")
        # The filter lives in the URL with the API's own names and values.
        page.goto(f"{self.target_url}?status=false_positive")
        for host in self.hosts:
            expect(
                self.finding_box(page, name, host),
                f"{name} on {host} under ?status=false_positive",
            ).to_have_count(1)
        self.check(True, f"?status=false_positive lists {name} on both hosts")

    def wait_for(self, predicate, seconds):
        deadline = time.monotonic() + seconds
        while True:
            try:
                if predicate():
                    return True
            except Exception:  # noqa: BLE001 - the element may be mid-swap
                pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    # -- keyboard ------------------------------------------------------------

    FOCUS_STYLE = """el => {
        const s = getComputedStyle(el);
        return [s.outlineStyle, s.outlineWidth, s.outlineColor, s.boxShadow,
                s.borderColor, s.backgroundColor, s.color, s.textDecorationLine].join('|');
    }"""

    def tab_to(self, page, locator, what, limit=300):
        """Presses Tab (or Shift+Tab, for a control before the focus) until
        `locator` has the focus; checks that the focus shows."""
        self.need(locator.count() > 0, f"{what} is on the page")
        rest = locator.first.evaluate(self.FOCUS_STYLE)
        key = locator.first.evaluate(
            """el => {
                const a = document.activeElement;
                if (!a || a === document.body) return 'Tab';
                return a.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_PRECEDING
                    ? 'Shift+Tab' : 'Tab';
            }"""
        )
        for _ in range(limit):
            page.keyboard.press(key)
            if locator.evaluate_all("els => els.includes(document.activeElement)"):
                focused = page.evaluate(f"({self.FOCUS_STYLE})(document.activeElement)")
                outline = focused.split("|")
                self.check(
                    focused != rest or (outline[0] != "none" and outline[1] != "0px"),
                    f"{what} shows the keyboard focus",
                )
                return
        self.need(False, f"{what} is reachable with Tab")

    # -- phases ----------------------------------------------------------------

    def walk_by_mouse(self):
        ctx = self.context("light")
        page = self.page = ctx.new_page()
        page.goto("/")
        expect(self.button(page, "Sign in")).to_be_visible()
        self.check(True, "/ shows a stranger the sign-in page")
        page.get_by_role("link", name="Register", exact=True).click()
        self.field(page, "Email").fill(self.email)
        self.field(page, "Password").fill(PASSWORD)
        self.field(page, "Full name").fill(FULL_NAME)
        self.button(page, "Register").click()
        signed_in = self.nav(page, "Dashboard")
        expect(self.button(page, "Sign in").or_(signed_in)).to_be_visible()
        if signed_in.is_visible():
            self.note("registering signs the user in; signing in is walked in the other contexts")
        else:
            self.field(page, "Email").fill(self.email)
            self.field(page, "Password").fill(PASSWORD)
            self.button(page, "Sign in").click()
            self.expect_signed_in(page)
        self.check(True, f"registered and signed in as {self.email}")

        self.nav(page, "Targets").click()
        self.field(page, "Domain").fill(self.domain)
        self.button(page, "Add target").click()
        if not re.search(rf"/targets/{UUID}", page.url):
            self.target_link(page).click()
        page.wait_for_url(re.compile(rf"/targets/{UUID}"))
        self.target_url = page.url.split("?")[0]
        self.check(True, f"the target's page is at {self.target_url}")

        self.start_full_scan(page)
        self.watch_to_the_end(page, shot_running="live-scan-running")
        # Live rows link to the target's filtered list until the scan is
        # recorded as ended; then the page swaps in links to the findings.
        finding_links = page.get_by_role("link", name=word(GIT)).and_(
            page.locator("a[href^='/findings/']")
        )
        self.wait_for(lambda: finding_links.count() > 0, 15)
        if finding_links.count() == 0:
            self.note("the finished live page links no finding; opening one from the target page")
            page.goto(self.target_url)
        self.check(
            self.wait_for(lambda: finding_links.count() > 0, 15),
            f"a link to the finding '{GIT}'",
        )
        finding_links.first.click()
        page.wait_for_url(re.compile(rf"/findings/{UUID}"))
        self.finding_url = page.url
        expect(self.button(page, "Retest")).to_be_enabled()
        self.check(True, "the finding's page has Retest")
        expect(page.get_by_role("heading", name=word(GIT)).first).to_be_visible()
        self.check(True, "the finding's page is headed by its name")
        if page.get_by_role("heading", name=re.compile("history", re.I)).count() == 0:
            self.note("the finding's page has no heading naming its status history")

        self.open_target(page)
        self.target_page_names(page)
        self.mark_false_positive(page, MARKED_BY_MOUSE, keyboard=False)

        page.goto(self.target_url)
        if self.args.pause_before_rescan:
            # The harness changes the lab now (its Git configuration goes).
            log("PAUSE before-rescan")
            self.need(sys.stdin.readline() != "", "the harness answered the pause")
        self.start_full_scan(page)
        self.watch_to_the_end(page)
        self.check_changes(page, live=True)
        page.reload()
        self.check_changes(page, live=False)
        self.check_false_positive_after_reload(page, MARKED_BY_MOUSE)
        ctx.close()

    def check_changes(self, page, live):
        """The scan page's changes since the previous scan: shown, and with
        --expect-fixed-count, that many fixed (as "N fixed" or "Fixed: N")."""
        after = "when the scan ends, without a reload" if live else "after a reload"
        heading = page.get_by_role("heading", name=re.compile(r"chang", re.I)).first
        self.check(
            self.wait_for(heading.is_visible, 20),
            f"the scan page shows its changes since the previous scan {after}",
        )
        n = self.args.expect_fixed_count
        if n is None:
            return
        region = page.get_by_role("region", name=re.compile(r"chang", re.I))
        fixed = re.compile(rf"(\b{n}\s+fixed\b)|(\bfixed\W{{0,3}}{n}\b)", re.I)

        def shows():
            text = region.first.inner_text() if region.count() else page.inner_text("body")
            return fixed.search(text)

        # The live page fetches the section until the scan is recorded as
        # ended (console.js), so the counts come without a reload.
        self.check(self.wait_for(shows, 15), f"the changes count {n} fixed {after}")

    def walk_by_keyboard(self):
        ctx = self.context("light")
        page = self.page = ctx.new_page()
        page.goto("/")
        self.tab_to(page, self.field(page, "Email"), "the field Email")
        page.keyboard.type(self.email)
        self.tab_to(page, self.field(page, "Password"), "the field Password")
        page.keyboard.type(PASSWORD)
        self.tab_to(page, self.button(page, "Sign in"), "the button Sign in")
        page.keyboard.press("Enter")
        self.expect_signed_in(page)
        self.check(True, "signed in by keyboard")
        self.tab_to(page, self.nav(page, "Targets"), "the navigation link Targets")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"/targets/?(\?.*)?$"))
        self.tab_to(page, self.target_link(page), "the target's link")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(rf"/targets/{UUID}"))
        self.check(True, "reached the target's page by keyboard")
        self.mark_false_positive(page, MARKED_BY_KEYBOARD, keyboard=True)
        ctx.close()

    def follow_nav(self, page, name):
        link = self.nav(page, name)
        href = link.get_attribute("href") or ""
        link.click()
        path = urlsplit(href).path
        if path:
            page.wait_for_url(lambda u: urlsplit(u).path.rstrip("/") == path.rstrip("/"))
        page.wait_for_load_state()

    def visit_screens(self, page, on_screen, by_url=False):
        """Every main screen in turn, signed out then signed in: through the
        links the first time (their addresses are kept), then by address
        (at 375 px the navigation may be behind a menu)."""

        def arrive(name):
            if not by_url:
                self.screen_urls[name] = page.url
            on_screen(name)

        page.goto("/")
        expect(self.button(page, "Sign in")).to_be_visible()
        arrive("sign-in")
        if by_url:
            page.goto(self.screen_urls["register"])
        else:
            page.get_by_role("link", name="Register", exact=True).click()
        expect(self.button(page, "Register")).to_be_visible()
        arrive("register")
        self.sign_in_by_mouse(page)
        for name in NAV_SCREENS:
            if by_url:
                page.goto(self.screen_urls[slug(name)])
            else:
                self.follow_nav(page, name)
            arrive(slug(name))
            if name == "Targets":
                for screen, url in [
                    ("target", self.target_url),
                    ("live-scan", self.scan_urls[-1] if self.scan_urls else None),
                    ("finding", self.finding_url),
                ]:
                    if url:
                        page.goto(url)
                        arrive(screen)
                    else:
                        self.check(False, f"the walk found the {screen} page to visit")

    def screenshots(self, scheme, viewport=DESKTOP, suffix=""):
        ctx = self.context(scheme, viewport=viewport)
        page = self.page = ctx.new_page()

        def on_screen(name):
            self.shot(page, f"{name}-{scheme}{suffix}")
            if name == "dashboard" and viewport is DESKTOP:
                self.background[scheme] = page.evaluate(
                    """() => {
                        for (const el of [document.body, document.documentElement]) {
                            const c = getComputedStyle(el).backgroundColor;
                            if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c;
                        }
                        return 'rgb(255, 255, 255)';
                    }"""
                )
            if viewport is PHONE:
                overflow = page.evaluate(
                    "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
                )
                self.check(overflow <= 1, f"{name} fits 375 px without scrolling sideways ({overflow} px over)")

        self.visit_screens(page, on_screen, by_url=viewport is PHONE)
        ctx.close()

    def first_load_weights(self):
        """What each screen's first load transfers, the cache off (bytes on
        the wire, headers included, as Chromium counts them)."""
        ctx = self.context("light")
        page = self.page = ctx.new_page()
        cdp = ctx.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        got = []
        cdp.on("Network.loadingFinished", lambda e: got.append(e.get("encodedDataLength", 0)))

        def weigh(name, url):
            got.clear()
            page.goto(url)
            time.sleep(0.5)
            weight = int(sum(got))
            self.weights[name] = weight
            self.check(
                weight < PAGE_BUDGET,
                f"{name} transfers {weight / 1024:.1f} KB on a first load (< 200 KB)",
            )

        self.need(self.screen_urls, "the screens' addresses are known")
        weigh("sign-in", "/")
        weigh("register", self.screen_urls["register"])
        self.sign_in_by_mouse(page)
        for name, url in self.screen_urls.items():
            if name not in ("sign-in", "register"):
                weigh(name, url)
        ctx.close()

    def axe_screens(self, scheme):
        # axe is a script of another origin as far as the CSP knows: this
        # context alone lets it in.
        ctx = self.context(scheme, bypass_csp=True)
        page = self.page = ctx.new_page()

        def on_screen(name):
            page.add_script_tag(content=self.axe_source)
            violations = page.evaluate(
                """async () => {
                    const r = await axe.run(document, {resultTypes: ['violations']});
                    return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                        nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 3),
                        count: v.nodes.length}));
                }"""
            )
            counts = {}
            for v in violations:
                counts[v["impact"]] = counts.get(v["impact"], 0) + v["count"]
                if v["impact"] in ("serious", "critical"):
                    self.axe_serious.append((name, scheme, v))
            self.axe[(name, scheme)] = counts
            bad = [v for v in violations if v["impact"] in ("serious", "critical")]
            self.check(
                not bad,
                f"axe on {name} ({scheme}): no serious or critical violation"
                + "".join(f"\n         {v['impact']} {v['id']}: {v['help']} at {v['nodes']}" for v in bad),
            )

        self.visit_screens(page, on_screen)
        ctx.close()

    def dark_differs(self):
        light, dark = self.background.get("light"), self.background.get("dark")
        self.need(light and dark, "the dashboard's background was read in both schemes")
        self.check(
            luminance(dark) < luminance(light),
            f"the dark scheme is darker than the light one ({dark} against {light})",
        )

    # -- report ----------------------------------------------------------------

    def report(self):
        if self.axe:
            impacts = ["critical", "serious", "moderate", "minor"]
            log("axe violations (nodes) by screen and impact:")
            log(f"  {'screen':<16} {'scheme':<6} " + " ".join(f"{i:>9}" for i in impacts))
            for (screen, scheme), counts in self.axe.items():
                log(
                    f"  {screen:<16} {scheme:<6} "
                    + " ".join(f"{counts.get(i, 0):>9}" for i in impacts)
                )
        if self.weights:
            log("first-load weight by screen: " + ", ".join(
                f"{k} {v / 1024:.1f} KB" for k, v in self.weights.items()))
        results = {
            "email": self.email,
            "checks": self.checks,
            "failures": self.failures,
            "notes": self.notes,
            "screenshots": self.screens,
            "axe": [
                {"screen": s, "scheme": c, **counts} for (s, c), counts in self.axe.items()
            ],
            "axe_serious_or_critical": [
                {"screen": s, "scheme": c, **v} for s, c, v in self.axe_serious
            ],
            "first_load_bytes": self.weights,
        }
        with open(os.path.join(self.args.screens, "results.json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
        serious = len(self.axe_serious)
        verdict = "ok" if not self.failures else "FAILED"
        log(
            f"summary: {verdict}: {self.checks} checks, {len(self.failures)} failing; "
            f"{len(self.screens)} screenshots in {self.args.screens}; "
            f"axe serious or critical: {serious}"
        )
        for f in self.failures:
            log(f"  failing: {first_lines(f, 1)}")
        return 0 if not self.failures else 1


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def luminance(rgb):
    parts = [float(x) for x in re.findall(r"[\d.]+", rgb)[:3]]
    r, g, b = parts
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the api's address, http://127.0.0.1:PORT")
    p.add_argument("--domain", required=True, help="the lab's domain, added as the target")
    p.add_argument("--screens", required=True, help="where screenshots and results.json go")
    p.add_argument("--axe", required=True, help="path of axe.min.js (axe-core from npm)")
    p.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    p.add_argument("--scan-timeout", type=float, default=240, help="seconds a scan may take")
    p.add_argument(
        "--pause-before-rescan",
        action="store_true",
        help="print 'PAUSE before-rescan' and wait for a line on stdin before the rescan",
    )
    p.add_argument(
        "--expect-fixed-count",
        type=int,
        metavar="N",
        help="how many findings the rescan's changes must show fixed",
    )
    p.add_argument("--deadline", type=int, default=1200, help="seconds for the whole walk")
    p.add_argument("--verbose", action="store_true", help="tracebacks of failing phases")
    args = p.parse_args()

    def out_of_time(*_):
        log(f"summary: FAILED: the walk did not end within {args.deadline} s")
        os._exit(3)  # the Playwright driver, and so Chromium, go with us

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(args.deadline)

    with sync_playwright() as pw:
        walk = Walk(args, pw)
        log(f"Chromium {walk.browser.version} against {walk.base}")
        walk.phase("register, sign in, scan, triage, rescan (mouse)", walk.walk_by_mouse)
        walk.phase("sign in and triage by keyboard alone", walk.walk_by_keyboard)
        for scheme in ("light", "dark"):
            walk.phase(f"screenshots ({scheme})", lambda s=scheme: walk.screenshots(s))
        walk.phase("screenshots (375 px)", lambda: walk.screenshots("light", PHONE, "-375"))
        walk.phase("first-load weights", walk.first_load_weights)
        walk.phase("light and dark differ", walk.dark_differs)
        for scheme in ("light", "dark"):
            walk.phase(f"axe ({scheme})", lambda s=scheme: walk.axe_screens(s))
        code = walk.report()
        walk.browser.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
