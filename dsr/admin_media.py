"""The stylesheet every ledger admin screen loads, shared by dsr/admin.py and dsr/admin_conflicts.py without
either importing the other for it."""

MEDIA_CSS = {"all": ["ledger/admin.css"]}
# Long lists (the request queue, the conflicts queue, the records list): compact columns that fit next to the
# sidebar and the filters at 1400 px (dsr/static/ledger/lists.css).
LIST_CSS = {"all": [*MEDIA_CSS["all"], "ledger/lists.css"]}
