"""The web console in a real browser: headless Chromium against a real, secured ``magnetar standalone``.

One standalone for the module with token authentication and authorization on
(super-user ``admin``) and stats sampled every second; one Chromium.  The
flow test signs in with a token, creates a tenant, a namespace and topics,
edits a policy, produces with the official client while watching the topic
page's live rate and backlog change, peeks an Avro message (shown decoded),
clears, resets and skips a subscription's cursor, unloads and compacts; a
role without permission sees the API's refusal in place of the data; with
authentication off the console is open.

Screenshots of the main views go to ``$MAGNETAR_TEST_ARTIFACTS/console``
when that is set, else to pytest's temporary directory (printed).
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

import jwt
import pytest

from magnetar.broker.auth.basic import apr1_md5
from magnetar.testing.chromium import chromium_driver, require_chromium
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")
from pulsar.schema import AvroSchema, Integer, Record, String  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.compat

SECRET = b"console-browser-secret-0123456789abcdef"
SUPER = "admin"
TENANT, NS, TOPIC, SUB = "console-t", "shop", "orders", "audit"
WAIT_S = 30
BASIC_USER, BASIC_PASSWORD = "ops", "ops-password"


class Order(Record):
    customer = String()
    amount = Integer()


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, "HS256")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    env = os.environ.get("MAGNETAR_TEST_ARTIFACTS")
    out = Path(env) / "console" if env else tmp_path_factory.mktemp("console-screenshots")
    out.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots: {out}")
    return out


@pytest.fixture(scope="module")
def browser():
    chromium, driver = require_chromium()
    with chromium_driver(chromium, driver) as drv:
        drv.set_page_load_timeout(WAIT_S)
        yield drv


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("console")
    (base / "secret.key").write_bytes(SECRET)
    (base / "htpasswd").write_text(f"{BASIC_USER}:{apr1_md5(BASIC_PASSWORD.encode(), b'c0ns01e5')}\n")
    conf = base / "standalone.conf"
    conf.write_text(
        "\n".join(
            [
                "authenticationEnabled=true",
                "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
                "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
                f"tokenSecretKey=file://{base / 'secret.key'}",
                f"basicAuthConf={base / 'htpasswd'}",
                "authorizationEnabled=true",
                f"superUserRoles={SUPER},{BASIC_USER}",
                "statsUpdateFrequencyInSecs=1",
                "",
            ]
        )
    )
    proc = StandaloneProcess(base / "data", config_file=conf)
    proc.start()
    yield proc
    code = proc.terminate()
    assert code == 0, f"standalone exited {code}; log tail:\n{proc.log_tail()}"


def admin_api(web_url: str, method: str, path: str, role: str = SUPER):
    req = urllib.request.Request(web_url + path, method=method)
    req.add_header("Authorization", f"Bearer {token(role)}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
            return r.status, json.loads(body) if body else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


# ---------------------------------------------------------------- browser helpers


def wait_for(drv, what: str, fn, timeout_s: float = WAIT_S):
    """Poll ``fn(drv)`` until truthy; on timeout fail with the page's banner and view text."""
    try:
        return WebDriverWait(
            drv, timeout_s, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
        ).until(fn)
    except TimeoutException:
        text = drv.execute_script("return document.body.innerText")[:3000]
        pytest.fail(f"timed out waiting for {what}; page text:\n{text}")


def text_of(drv, css: str) -> str:
    els = drv.find_elements(By.CSS_SELECTOR, css)
    return els[0].text if els else ""


def number(drv, css: str) -> float | None:
    raw = text_of(drv, css).replace(",", "").split(" ")[0]
    try:
        return float(raw)
    except ValueError:
        return None


def go(drv, hash_: str) -> None:
    drv.execute_script("window.location.hash = arguments[0]", hash_)


def submit(drv, form_css: str, **fields: str) -> None:
    form = drv.find_element(By.CSS_SELECTOR, form_css)
    for name, value in fields.items():
        el = form.find_element(By.NAME, name)
        if el.tag_name == "select":
            Select(el).select_by_value(value)
        else:
            el.clear()
            el.send_keys(value)
    form.find_element(By.CSS_SELECTOR, "button:not([type=button])").click()


def banner_done(drv, what: str) -> None:
    wait_for(drv, f"banner '{what}: done'", lambda d: f"{what}: done" in text_of(d, "#banner"))


def sign_out(drv, web_url: str) -> None:
    """Load the console and sign out through its button if someone is signed in (clears the tab's storage)."""
    drv.get(f"{web_url}/console/")

    def settled(d) -> bool:
        return (
            d.find_element(By.ID, "signin").is_displayed() or d.find_element(By.ID, "signout").is_displayed()
        )

    wait_for(drv, "the console to settle", settled)
    if drv.find_element(By.ID, "signout").is_displayed():
        drv.find_element(By.ID, "signout").click()
    wait_for(drv, "the sign-in form", lambda d: d.find_element(By.ID, "signin").is_displayed())


def sign_in(drv, web_url: str, role: str, *, poll_ms: int = 500) -> None:
    drv.get(f"{web_url}/console/?poll={poll_ms}#/tenants")
    wait_for(drv, "the sign-in form", lambda d: d.find_element(By.ID, "signin").is_displayed())
    box = drv.find_element(By.ID, "signin-token")
    box.clear()
    box.send_keys(token(role))
    drv.find_element(By.ID, "signin-submit").click()
    wait_for(drv, f"signed in as {role}", lambda d: text_of(d, "#who") == f"signed in as {role}")
    drv.execute_script("window.CONSOLE_NO_CONFIRM = true")


def shot(drv, artifacts: Path, name: str) -> None:
    height = drv.execute_script("return Math.min(document.body.scrollHeight + 40, 4000)")
    drv.set_window_size(1400, max(900, height))
    drv.save_screenshot(str(artifacts / f"{name}.png"))
    drv.set_window_size(1400, 1000)


class Producing:
    """The official client producing Avro orders at a steady pace in a thread, until stopped."""

    def __init__(self, broker_url: str, topic: str) -> None:
        self.client = pulsar.Client(
            broker_url,
            authentication=pulsar.AuthenticationToken(token(SUPER)),
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.producer = self.client.create_producer(
            topic, schema=AvroSchema(Order), producer_name="console-p"
        )
        self.sent = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.producer.send(Order(customer=f"customer-{self.sent}", amount=100 + self.sent))
                self.sent += 1
                self._stop.wait(0.05)
        except BaseException as exc:  # surfaced by stop()
            self.errors.append(exc)

    def __enter__(self) -> Producing:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(15)
        assert not self.errors, self.errors
        return self.sent

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.producer.close()
        self.client.close()


# ---------------------------------------------------------------- tests


def test_console_sign_in_create_produce_watch_peek_reset(secured, browser, artifacts) -> None:
    drv, web = browser, secured.web_url
    # Authentication is on: the console asks for credentials, and a bad token gets the API's 401.
    drv.get(f"{web}/console/?poll=500")
    wait_for(drv, "the sign-in form", lambda d: d.find_element(By.ID, "signin").is_displayed())
    drv.find_element(By.ID, "signin-token").send_keys("not-a-token")
    drv.find_element(By.ID, "signin-submit").click()
    wait_for(drv, "a 401 for a bad token", lambda d: "401" in text_of(d, "#signin-error"))
    shot(drv, artifacts, "01-sign-in")

    sign_in(drv, web, SUPER)
    wait_for(drv, "the tenant list", lambda d: "public" in text_of(d, "#tenants"))
    submit(drv, "#create-tenant", tenant=TENANT, adminRoles="shop-admin")
    banner_done(drv, f"create tenant {TENANT}")
    wait_for(drv, "the new tenant listed", lambda d: TENANT in text_of(d, "#tenants"))
    assert admin_api(web, "GET", f"/admin/v2/tenants/{TENANT}")[1]["adminRoles"] == ["shop-admin"]
    shot(drv, artifacts, "02-tenants")
    submit(drv, "#create-tenant", tenant="console-tmp")
    banner_done(drv, "create tenant console-tmp")
    drv.find_element(By.CSS_SELECTOR, "[data-delete-tenant=console-tmp]").click()
    banner_done(drv, "delete tenant console-tmp")
    assert admin_api(web, "GET", "/admin/v2/tenants/console-tmp")[0] == 404

    go(drv, f"#/tenant/{TENANT}")
    wait_for(drv, "the tenant page", lambda d: "shop-admin" in text_of(d, "#tenant-roles"))
    submit(drv, "#update-tenant", adminRoles="shop-admin, shop-ops")
    banner_done(drv, f"update tenant {TENANT}")
    assert text_of(drv, "#tenant-roles") == "shop-admin, shop-ops"
    assert admin_api(web, "GET", f"/admin/v2/tenants/{TENANT}")[1]["adminRoles"] == ["shop-admin", "shop-ops"]
    submit(drv, "#create-ns", ns=NS)
    banner_done(drv, f"create namespace {TENANT}/{NS}")
    wait_for(drv, "the namespace listed", lambda d: f"{TENANT}/{NS}" in text_of(d, "#namespaces"))
    submit(drv, "#create-ns", ns="tmp")
    banner_done(drv, f"create namespace {TENANT}/tmp")
    drv.find_element(By.CSS_SELECTOR, f"[data-delete-ns='{TENANT}/tmp']").click()
    banner_done(drv, f"delete namespace {TENANT}/tmp")
    assert admin_api(web, "GET", f"/admin/v2/namespaces/{TENANT}")[1] == [f"{TENANT}/{NS}"]

    go(drv, f"#/ns/{TENANT}/{NS}")
    wait_for(drv, "the namespace page", lambda d: d.find_elements(By.ID, "policies"))
    submit(drv, "#create-topic", topic=TOPIC, partitions="0")
    banner_done(drv, f"create topic {TOPIC}")
    submit(drv, "#create-topic", topic="parted", partitions="3")
    banner_done(drv, "create topic parted")
    wait_for(
        drv,
        "both topics listed",
        lambda d: "parted" in text_of(d, "#topics") and TOPIC in text_of(d, "#topics"),
    )
    status, parts = admin_api(web, "GET", f"/admin/v2/persistent/{TENANT}/{NS}/parted/partitions")
    assert parts == {"partitions": 3}, (status, parts)
    # Edit a policy through its REST route; the page shows the stored value.
    submit(drv, ".policy-edit[data-policy=messageTTL]", value="3600")
    banner_done(drv, "set messageTTL")
    wait_for(
        drv, "messageTTL shown", lambda d: text_of(d, "code.policy-value[data-policy=messageTTL]") == "3600"
    )
    assert admin_api(web, "GET", f"/admin/v2/namespaces/{TENANT}/{NS}/messageTTL")[1] == 3600
    shot(drv, artifacts, "03-namespace")

    go(drv, f"#/topic/persistent/{TENANT}/{NS}/{TOPIC}")
    wait_for(drv, "the topic page", lambda d: d.find_elements(By.ID, "stat-backlog"))
    submit(drv, "#create-sub", sub=SUB, **{"from": "earliest"})
    banner_done(drv, f"create subscription {SUB}")
    wait_for(drv, "the subscription listed", lambda d: SUB in text_of(d, "#subscriptions-table"))
    assert number(drv, "#stat-backlog") == 0

    # Produce with the official client and watch the live values move without reloading the page.
    topic = f"persistent://{TENANT}/{NS}/{TOPIC}"
    marker = drv.execute_script("window.__sameDocument = 1; return window.__sameDocument")
    seen_rates: list[float] = []
    with Producing(secured.broker_url, topic) as producing:
        wait_for(drv, "the producer listed", lambda d: "console-p" in text_of(d, "#producers-table"))

        def rate_is_up(d) -> bool:
            rate = number(d, "#stat-msgRateIn")
            if rate is not None:
                seen_rates.append(rate)
            return bool(rate and rate > 0) and (number(d, "#stat-backlog") or 0) > 5

        wait_for(drv, "msgRateIn > 0 and a growing backlog", rate_is_up)
        backlog_while_producing = number(drv, "#stat-backlog")
        chart_points = drv.execute_script(
            "const p = document.querySelector('polyline[data-series=in]'); return p ? p.getAttribute('points') : ''"
        )
        shot(drv, artifacts, "04-topic-live")
        sent = producing.stop()
    assert sent > backlog_while_producing > 5
    assert len(chart_points.split()) >= 2, chart_points
    wait_for(drv, f"backlog {sent}", lambda d: number(d, "#stat-backlog") == sent)
    wait_for(drv, "messages in counted", lambda d: number(d, "#stat-msgInCounter") == sent)
    assert (number(drv, "#stat-storageSize") or 0) > 0
    assert drv.execute_script("return window.__sameDocument") == marker  # no reload happened
    status, stats = admin_api(web, "GET", f"/admin/v2/persistent/{TENANT}/{NS}/{TOPIC}/stats")
    assert stats["subscriptions"][SUB]["msgBacklog"] == sent

    # Peek: the Avro payload shown decoded with the topic's schema from the registry.
    Select(drv.find_element(By.ID, "sub-select")).select_by_value(SUB)
    peek = drv.find_element(By.CSS_SELECTOR, "#sub-actions [name=peek]")
    peek.clear()
    peek.send_keys("3")
    drv.find_element(By.ID, "sub-peek").click()
    wait_for(
        drv, "three decoded messages", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#peek .payload")) == 3
    )
    payloads = drv.find_elements(By.CSS_SELECTOR, "#peek .payload")
    assert {p.get_attribute("data-format") for p in payloads} == {"avro"}
    assert json.loads(payloads[0].text) == {"customer": "customer-0", "amount": 100}
    assert json.loads(payloads[2].text) == {"customer": "customer-2", "amount": 102}
    wait_for(drv, "the schema shown", lambda d: text_of(d, "#schema-type") == "AVRO")
    shot(drv, artifacts, "05-topic-peek")

    # Cursor operations: clear the backlog, reset to the earliest message, skip some.
    drv.find_element(By.ID, "sub-clear").click()
    banner_done(drv, f"clear backlog of {SUB}")
    wait_for(drv, "backlog 0 after clearing", lambda d: number(d, "#stat-backlog") == 0)
    reset = drv.find_element(By.ID, "reset-to")
    reset.clear()
    reset.send_keys("earliest")
    drv.find_element(By.ID, "sub-reset").click()
    banner_done(drv, f"reset cursor of {SUB} to earliest")
    wait_for(drv, f"backlog {sent} after the reset", lambda d: number(d, "#stat-backlog") == sent)
    skip = drv.find_element(By.CSS_SELECTOR, "#sub-actions [name=skip]")
    skip.clear()
    skip.send_keys("4")
    drv.find_element(By.ID, "sub-skip").click()
    banner_done(drv, f"skip 4 on {SUB}")
    wait_for(drv, f"backlog {sent - 4} after skipping", lambda d: number(d, "#stat-backlog") == sent - 4)
    status, stats = admin_api(web, "GET", f"/admin/v2/persistent/{TENANT}/{NS}/{TOPIC}/stats")
    assert stats["subscriptions"][SUB]["msgBacklog"] == sent - 4

    # A Key_Shared consumer: the subscription's Key_Shared info and the consumer's hash ranges.
    client = pulsar.Client(
        secured.broker_url,
        authentication=pulsar.AuthenticationToken(token(SUPER)),
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        client.subscribe(
            topic,
            "ks",
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name="ks-consumer",
            initial_position=pulsar.InitialPosition.Earliest,
            schema=AvroSchema(Order),
        )
        wait_for(drv, "the Key_Shared consumer", lambda d: "ks-consumer" in text_of(d, "#consumers-table"))
        wait_for(
            drv, "its hash ranges", lambda d: "65536 hashes" in text_of(d, "#consumers-table .hash-ranges")
        )
        assert "Key_Shared" in text_of(drv, "#subscriptions-table")
        wait_for(drv, "Key_Shared mode", lambda d: "mode" in text_of(d, "#subscriptions-table .key-shared"))
        shot(drv, artifacts, "06-topic-key-shared")
    finally:
        client.close()

    # Topic actions.
    drv.find_element(By.ID, "topic-compact").click()
    banner_done(drv, f"trigger compaction of {topic}")
    drv.find_element(By.ID, "topic-unload").click()
    banner_done(drv, f"unload {topic}")

    # The cluster views.
    go(drv, "#/clusters")
    wait_for(drv, "the cluster list", lambda d: "standalone" in text_of(d, "#clusters"))
    shot(drv, artifacts, "07-clusters")
    go(drv, "#/brokers")
    wait_for(drv, "the broker list", lambda d: f"{TENANT}/{NS}" in text_of(d, "table.brokers"))
    assert "topics" in text_of(drv, "#broker-load")
    shot(drv, artifacts, "08-brokers")
    go(drv, "#/bookies")
    wait_for(drv, "the bookie list", lambda d: text_of(d, "#bookies"))
    bookies_text = text_of(drv, "#bookies").lower()  # disk use and read-only state, as the admin API has them
    assert "freespace" in bookies_text and "totalspace" in bookies_text and "readonly" in bookies_text
    assert "gib" in bookies_text or "mib" in bookies_text
    shot(drv, artifacts, "09-bookies")

    # Deleting from the console: a topic, then the partitioned one.
    go(drv, f"#/ns/{TENANT}/{NS}")
    wait_for(drv, "the topics", lambda d: "parted" in text_of(d, "#topics"))
    drv.find_element(By.CSS_SELECTOR, "[data-delete-topic=parted]").click()
    banner_done(drv, "delete topic parted")
    wait_for(drv, "the partitioned topic gone", lambda d: "parted" not in text_of(d, "#topics"))
    assert admin_api(web, "GET", f"/admin/v2/persistent/{TENANT}/{NS}/partitioned")[1] == []
    # The page's own scripts raised nothing along the way (refused HTTP calls are logged as network errors).
    script_errors = [e for e in drv.get_log("browser") if e.get("source") == "javascript"]
    assert not script_errors, script_errors


def test_console_role_without_permission_sees_the_apis_refusal(secured, browser, artifacts) -> None:
    drv, web = browser, secured.web_url
    req = urllib.request.Request(
        web + "/admin/v2/tenants/locked",
        data=json.dumps({"adminRoles": ["locked-admin"], "allowedClusters": ["standalone"]}).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {token(SUPER)}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).close()
    for path in ("/admin/v2/namespaces/locked/ns", "/admin/v2/persistent/locked/ns/secret"):
        status, body = admin_api(web, "PUT", path)
        assert status in (200, 204), body

    sign_out(drv, web)
    sign_in(drv, web, "intruder")
    # The tenant list is for super-users: the API's 403 and reason are shown, not tenants.
    wait_for(
        drv,
        "a 403 on the tenant list",
        lambda d: d.find_elements(By.CSS_SELECTOR, "main .refusal[data-status='403']"),
    )
    assert "public" not in text_of(drv, "main")
    shot(drv, artifacts, "10-refused-tenants")

    go(drv, "#/topic/persistent/locked/ns/secret")
    wait_for(drv, "a 403 on the topic stats", lambda d: "403" in text_of(d, "#topic-stats-error"))
    refusal = text_of(drv, "#topic-stats-error")
    status, reason = admin_api(web, "GET", "/admin/v2/persistent/locked/ns/secret/stats", role="intruder")
    assert status == 403
    assert json.loads(reason)["reason"] in refusal  # exactly the API's reason
    assert not drv.find_elements(By.ID, "stat-backlog")  # no numbers shown
    shot(drv, artifacts, "11-refused-topic")

    # An action is refused by the API too, and nothing changes.
    go(drv, "#/tenants")
    wait_for(drv, "the create form", lambda d: d.find_elements(By.ID, "create-tenant"))
    submit(drv, "#create-tenant", tenant="sneaky", allowedClusters="standalone")
    wait_for(
        drv, "the refusal in the banner", lambda d: "create tenant sneaky failed" in text_of(d, "#banner")
    )
    assert "403" in text_of(drv, "#banner")
    assert admin_api(web, "GET", "/admin/v2/tenants/sneaky")[0] == 404

    # The tenant's admin: refused the tenant list (super-user only) but shown its own topic's stats.
    sign_out(drv, web)
    sign_in(drv, web, "locked-admin")
    wait_for(drv, "a 403 on the tenant list", lambda d: "403" in text_of(d, "main .refusal"))
    go(drv, "#/topic/persistent/locked/ns/secret")
    wait_for(drv, "the topic's stats", lambda d: number(d, "#stat-backlog") == 0)
    assert text_of(drv, "#topic-stats-error") == ""


def test_console_basic_sign_in(secured, browser) -> None:
    drv, web = browser, secured.web_url
    sign_out(drv, web)
    drv.find_element(By.CSS_SELECTOR, "input[name=kind][value=basic]").click()
    drv.find_element(By.ID, "signin-user").send_keys(BASIC_USER)
    drv.find_element(By.ID, "signin-password").send_keys("wrong")
    drv.find_element(By.ID, "signin-submit").click()
    wait_for(drv, "a 401 for a wrong password", lambda d: "401" in text_of(d, "#signin-error"))
    pw = drv.find_element(By.ID, "signin-password")
    pw.clear()
    pw.send_keys(BASIC_PASSWORD)
    drv.find_element(By.ID, "signin-submit").click()
    wait_for(drv, "signed in with basic", lambda d: text_of(d, "#who") == f"signed in as {BASIC_USER}")
    wait_for(drv, "the tenant list (ops is a super-user)", lambda d: "public" in text_of(d, "#tenants"))


def test_console_is_open_when_authentication_is_off(browser, tmp_path) -> None:
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with StandaloneProcess(tmp_path / "data") as proc:
        drv = browser
        drv.get(f"{proc.web_url}/console/#/tenants")  # another origin (port): no stored credentials
        wait_for(drv, "the tenant list without signing in", lambda d: "public" in text_of(d, "#tenants"))
        assert text_of(drv, "#who") == "open (no sign-in needed)"
        assert not drv.find_element(By.ID, "signin").is_displayed()
