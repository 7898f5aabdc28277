"""The API's JSON parser: DRF's, refusing what would otherwise end as a 500.

- nesting deep enough to exhaust Python's recursion limit (``[[[[...`` a few thousand deep)
  raises RecursionError, which DRF's parser does not catch;
- ``NaN``/``Infinity`` literals are already refused by DRF (strict JSON), but a number too
  large for a float (``1e400``) still parses to ``inf``: refused here too, as JSON has no infinity.
"""

from __future__ import annotations

import math

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        raise ParseError("JSON parse error - a number is out of range (too large for a float)")
    if isinstance(value, dict):
        for item in value.values():
            _finite(item)
    elif isinstance(value, list):
        for item in value:
            _finite(item)
    return value


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type=media_type, parser_context=parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        return _finite(data)
