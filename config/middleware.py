"""Request checks that hold for every URL, API, admin and public pages alike."""
from __future__ import annotations

from django.http import JsonResponse


class RejectNulMiddleware:
    """A NUL character in the query string is refused before any view runs.

    PostgreSQL cannot store or compare a string that holds NUL: a query with one fails with `DataError`,
    a 500, wherever a parameter reaches the database (`?q=` of the search, `?holder=` of the fleet
    notices, the admin's search box). No path or parameter of this service can hold one, so this is the
    one place that refuses them (a JSON body's strings are refused by `config.parsers.JSONParser`; a path
    reaches the database only through converters, `<int:...>` or a UUID parsed first).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                return JsonResponse({"code": "invalid_parameter", "detail": "A query parameter holds a NUL character.",
                                     "parameter": name.replace("\x00", "")}, status=400)
        return self.get_response(request)
