import pytest
from django.core.cache import cache

from .factories import TenantFactory, receipt_make


@pytest.fixture(autouse=True)
def tombstone_settings(settings):
    settings.LEDGER_SIGNING_PASSPHRASE = "test passphrase"
    settings.LEDGER_LOG_ORIGIN = "ledger.test/tombstones"
    cache.clear()  # the rate limiter's counters
    yield
    cache.clear()


@pytest.fixture
def tenant(db):
    return TenantFactory()


@pytest.fixture
def receipt(db):
    return receipt_make()


@pytest.fixture
def page(browser):
    """A Chromium page (browser: tests/conftest.py) that fails the test on any JavaScript error."""
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
