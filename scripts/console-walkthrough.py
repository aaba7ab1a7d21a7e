#!/usr/bin/env python3
"""Walks through the Stratus console in headless Chromium, as a person would, and saves a screenshot
of each page: sign in, create a container and a user, create a record, edit it, query it, deploy the
schema, open the live request log, the activity charts, the health page and the audit log.

Usage: console-walkthrough.py BASE_URL ADMIN_TOKEN SCREENSHOT_DIRECTORY
Prints one line per step; exits non-zero (with the reason) when a step fails.
Needs Debian's chromium and chromium-driver and Selenium from PyPI (scripts/test installs them).
"""
import os
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

base, admin_token, shots = sys.argv[1:4]
os.makedirs(shots, exist_ok=True)
container = "iCloud.com.example.console"

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"]:
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
wait = WebDriverWait(driver, 30)
step_number = 0


def step(name):
    global step_number
    step_number += 1
    driver.save_screenshot(os.path.join(shots, "%02d-%s.png" % (step_number, name)))
    print("step %d: %s" % (step_number, name), flush=True)


def text_of(element_id):
    """The text of an element, or "" while the page is being replaced."""
    try:
        return driver.find_element(By.ID, element_id).text
    except Exception:
        return ""


def selected_option(element_id):
    """The text of a select's chosen option, or "" while its options are being replaced."""
    try:
        return Select(driver.find_element(By.ID, element_id)).first_selected_option.text
    except Exception:
        return ""


def output_of(form):
    """Waits until the form's <output> says something, and returns it."""
    wait.until(lambda d: form.find_element(By.TAG_NAME, "output").text != "")
    return form.find_element(By.TAG_NAME, "output").text


def submit_until(form, done):
    """Submits a form whose endpoint reloads the page when it accepts; fails with the refusal."""
    form.find_element(By.TAG_NAME, "button").click()
    refusal = []

    def settled(d):
        try:
            message = form.find_element(By.TAG_NAME, "output").text
            if message:
                refusal.append(message)
                return True
        except Exception:
            pass
        return done(d)

    wait.until(settled)
    if refusal:
        raise SystemExit("the form was refused: " + refusal[0])


try:
    # Signing in: /console sends a stranger to the sign-in page.
    driver.get(base + "/console")
    wait.until(lambda d: d.find_elements(By.ID, "token"))
    step("signin")
    driver.find_element(By.ID, "token").send_keys("not the token")
    driver.find_element(By.ID, "signin").click()
    wait.until(lambda d: "not the admin token" in d.page_source)
    driver.find_element(By.ID, "token").send_keys(admin_token)
    driver.find_element(By.ID, "signin").click()
    wait.until(lambda d: d.current_url.endswith("/console/containers"))
    step("containers")

    # A container: its API token is shown once.
    form = driver.find_element(By.ID, "new-container")
    form.find_element(By.NAME, "identifier").send_keys(container)
    form.find_element(By.TAG_NAME, "button").click()
    revealed = output_of(form)
    if not revealed.startswith("apiToken: "):
        raise SystemExit("creating the container failed: " + revealed)
    step("container-created")
    driver.get(base + "/console/containers")
    # Times show in the reader's time zone, not as the server's UTC ISO 8601.
    created = [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "td") if cell.get_attribute("title")]
    if not created or any(text.endswith("Z") and "T" in text for text in created):
        raise SystemExit("the containers' creation times are not shown as local dates: %r" % created)
    driver.find_element(By.LINK_TEXT, container).click()
    wait.until(lambda d: d.find_elements(By.ID, "new-user"))

    # A user.
    form = driver.find_element(By.ID, "new-user")
    form.find_element(By.NAME, "username").send_keys("ada")
    form.find_element(By.NAME, "password").send_keys("correct horse")
    submit_until(form, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-user="ada"]'))
    step("user-created")

    # The container's own quotas: a record quota for the container, saved through the admin API.
    form = driver.find_element(By.ID, "quotas")
    field = form.find_element(By.NAME, "container.records")
    field.clear()
    field.send_keys("1000")
    submit_until(form, lambda d: "set for this container" in d.page_source)
    if driver.find_element(By.NAME, "container.records").get_attribute("value") != "1000":
        raise SystemExit("the container's record quota was not saved")
    step("quotas")

    # A record, created as ada in her private database, then edited and found by a query.
    driver.get(base + "/console/containers/" + container + "/data")
    scope = driver.find_element(By.ID, "scope")
    Select(scope.find_element(By.NAME, "user")).select_by_visible_text("ada")
    form = driver.find_element(By.ID, "create-record")
    form.find_element(By.NAME, "recordType").send_keys("Note")
    form.find_element(By.NAME, "recordName").send_keys("first-note")
    form.find_element(By.ID, "create").click()
    created = output_of(form)
    if not created.startswith("saved"):
        raise SystemExit("creating the record failed: " + created)
    step("record-created")
    editor = driver.find_element(By.ID, "edit-record")
    fields = editor.find_element(By.NAME, "fields")
    fields.clear()
    fields.send_keys('{"title": {"value": "Hello again"}, "priority": {"value": 3}}')
    editor.find_element(By.ID, "save-record").click()
    edited = output_of(editor)
    if not edited.startswith("saved"):
        raise SystemExit("editing the record failed: " + edited)
    step("record-edited")
    query = driver.find_element(By.ID, "query")
    query.find_element(By.NAME, "recordType").send_keys("Note")
    driver.find_element(By.ID, "add-filter").click()
    driver.find_element(By.CSS_SELECTOR, "#filters .field").send_keys("title")
    driver.find_element(By.CSS_SELECTOR, "#filters .value").send_keys("Hello again")
    query.find_element(By.NAME, "sortField").send_keys("priority")
    driver.find_element(By.ID, "add-sort").click()
    driver.find_elements(By.CSS_SELECTOR, "#sorts .sort .field")[1].send_keys("title")
    driver.find_element(By.ID, "run-query").click()
    wait.until(lambda d: "first-note" in text_of("results") or text_of("query-error"))
    if "first-note" not in driver.find_element(By.ID, "results").text:
        raise SystemExit("the query failed: " + driver.find_element(By.ID, "query-error").text)
    step("query")

    # A zone of ada's, a record in it, and every record of the zone without naming a type.
    driver.find_element(By.ID, "new-zone").send_keys("Trips")
    driver.find_element(By.ID, "create-zone").click()
    wait.until(lambda d: "Trips" in selected_option("zone") or text_of("query-error"))
    if text_of("query-error"):
        raise SystemExit("creating the zone failed: " + text_of("query-error"))
    form = driver.find_element(By.ID, "create-record")
    form.find_element(By.NAME, "recordType").clear()
    form.find_element(By.NAME, "recordType").send_keys("Trip")
    form.find_element(By.NAME, "recordName").clear()
    form.find_element(By.NAME, "recordName").send_keys("trip-1")
    form.find_element(By.ID, "create").click()
    wait.until(lambda d: "trip-1" in text_of("record-title") or "saved" not in form.find_element(By.TAG_NAME, "output").text)
    if "trip-1" not in text_of("record-title"):
        raise SystemExit("creating the record in the zone failed: " + form.find_element(By.TAG_NAME, "output").text)
    driver.find_element(By.ID, "browse-zone").click()
    wait.until(lambda d: "trip-1" in text_of("results") or text_of("query-error"))
    if "trip-1" not in text_of("results") or "first-note" in text_of("results"):
        raise SystemExit("browsing the zone failed: " + text_of("results") + text_of("query-error"))
    step("zone-browsed")

    # The schema: the new type is in development only, until it is deployed.
    driver.get(base + "/console/containers/" + container + "/schema")
    if "Note" not in driver.find_element(By.ID, "diff").text:
        raise SystemExit("the schema diff does not show the new record type")
    step("schema-before-deploy")
    driver.find_element(By.ID, "deploy").click()
    driver.switch_to.alert.accept()
    wait.until(lambda d: "Production has the development schema" in text_of("diff"))
    step("schema-deployed")

    # The live log shows the requests the pages made, errors highlighted.
    driver.get(base + "/console/requests?live=1")
    wait.until(lambda d: "records/modify" in text_of("request-log"))
    step("requests")
    driver.get(base + "/console/activity")
    step("activity")
    driver.get(base + "/console/health")
    step("health")
    driver.get(base + "/console/audit")
    audit = driver.find_element(By.ID, "audit").text
    for expected in ["POST /admin/1/containers", "POST /admin/1/containers/%s/users" % container, "records/modify as _",
                     "deploy-schema"]:
        if expected not in audit:
            raise SystemExit("the audit log lacks %r:\n%s" % (expected, audit))
    step("audit")
    driver.get(base + "/console/containers/" + container + "/people")
    step("people")
    driver.find_element(By.ID, "signout").click()
    wait.until(lambda d: d.find_elements(By.ID, "token"))
    driver.get(base + "/console/containers")
    wait.until(lambda d: d.find_elements(By.ID, "token"))
    step("signed-out")
finally:
    driver.quit()
