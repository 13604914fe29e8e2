"""A server that drips: the report ends at the minimum rate or at --index-deadline, whatever the body's length,
with an honest verdict (could not judge, exit 3), one JSON document, and no traceback."""
from __future__ import annotations

from .hostile_index import Drip, DripHeaders, HostileIndex, Static, assert_no_traceback, html_page, reasons, \
    run_bounded

# 1 byte a second: main's client read this page for as long as it lasted (600 s), --index-deadline included
PAGE = html_page({"app-1.0-py3-none-any.whl": "../../files/app-1.0-py3-none-any.whl"}) + b" " * 400


def report(project, url, *extra, env=None):
    return run_bounded(["--manifest", str(project), "report", "--json", "--no-lock", "--index-url", url, *extra],
                       cwd=project.parent, env=env, timeout=120)


def test_a_dripped_page_is_given_up_at_the_minimum_rate(project):
    with HostileIndex(lifetime=150) as ix:
        ix.route("/simple/app/", Drip(PAGE, every=1.0))
        ix.route("/simple/shared-dsl/", Drip(PAGE, every=1.0))
        run = report(project, ix.url)
    assert_no_traceback(run)
    assert run.code == 3, run.stderr
    doc = run.document()
    assert doc["summary"]["clean"] is False
    why = reasons(run)
    assert "minimum rate" in why and "PINWHEEL_MIN_TRANSFER_RATE" in why and "\n" not in why, why
    assert ix.url + "app/" in why


def test_a_dripped_page_is_given_up_at_the_command_deadline(project):
    """With the rate check off, --index-deadline bounds the whole command: the body's length does not."""
    with HostileIndex(lifetime=150) as ix:
        ix.route("/simple/app/", Drip(PAGE, every=0.5))
        ix.route("/simple/shared-dsl/", Drip(PAGE, every=0.5))
        run = report(project, ix.url, "--index-deadline", "4", env={"PINWHEEL_MIN_TRANSFER_RATE": "0"})
    assert_no_traceback(run)
    assert run.code == 3, run.stderr
    why = reasons(run)
    assert "deadline" in why and "\n" not in why, why


def test_a_request_deadline_bounds_one_request_within_a_longer_command(project):
    with HostileIndex(lifetime=150) as ix:
        ix.route("/simple/app/", Drip(PAGE, every=0.5))
        ix.route("/simple/shared-dsl/", Drip(PAGE, every=0.5))
        run = report(project, ix.url, "--index-deadline", "600",
                     env={"PINWHEEL_MIN_TRANSFER_RATE": "0", "PINWHEEL_REQUEST_DEADLINE": "3"})
    assert_no_traceback(run)
    assert run.code == 3, run.stderr
    why = reasons(run)
    assert "PINWHEEL_REQUEST_DEADLINE" in why, why


def test_dripped_headers_are_given_up_at_the_request_deadline(project):
    """A status line and then a header a byte a second: no body ever starts, and the request still ends."""
    with HostileIndex(lifetime=150) as ix:
        ix.route("/simple/app/", DripHeaders(every=1.0))
        ix.route("/simple/shared-dsl/", DripHeaders(every=1.0))
        run = report(project, ix.url, env={"PINWHEEL_REQUEST_DEADLINE": "3"})
    assert_no_traceback(run)
    assert run.code == 3, run.stderr
    why = reasons(run)
    assert "no answer before the deadline (raise it with --index-deadline or PINWHEEL_REQUEST_DEADLINE)" in why, why
    assert ix.url + "app/" in why and "\n" not in why


def test_a_limit_variable_that_does_not_read_is_bad_input(project):
    with HostileIndex(lifetime=60) as ix:
        ix.route("/simple/app/", Static(PAGE, content_type="text/html"))
        run = report(project, ix.url, env={"PINWHEEL_MIN_TRANSFER_RATE": "fast"})
        assert not ix.requests  # refused before any request
    assert_no_traceback(run)
    assert run.code == 2 and not run.stdout, run.stderr
    assert run.stderr == ("error: PINWHEEL_MIN_TRANSFER_RATE='fast': not a number of bytes/s "
                          "(the limit for the slowest transfer accepted)\n")
