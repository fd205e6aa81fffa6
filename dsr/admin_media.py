"""The stylesheet every ledger admin screen loads, shared by dsr/admin.py and dsr/admin_conflicts.py without
either importing the other for it."""

MEDIA_CSS = {"all": ["ledger/admin.css"]}
