"""Serve plotly.js from the ``plotly`` PyPI package as the static file
``observability/vendor/plotly.min.js``: no CDN, no Node.js, no copy of the 4.8 MB bundle in git.

A staticfiles finder, so the development server serves it and ``collectstatic`` copies it into
STATIC_ROOT for production like any other static file.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PREFIX = "observability/vendor"
FILES = ("plotly.min.js",)


def _package_data() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.location = _package_data()
        self.storage = FileSystemStorage(location=str(self.location))
        self.storage.prefix = PREFIX  # collectstatic puts the files under this folder

    def check(self, **kwargs):
        missing = [name for name in FILES if not (self.location / name).is_file()]
        if missing:
            return [
                Error(
                    f"plotly package has no {', '.join(missing)} in {self.location}", id="observability.E001"
                )
            ]
        return []

    def find(self, path, find_all=False, **kwargs):
        find_all = find_all or kwargs.get("all", False)
        for name in FILES:
            if path == f"{PREFIX}/{name}":
                match = str(self.location / name)
                return [match] if find_all else match
        return [] if find_all else None

    def list(self, ignore_patterns):
        for name in FILES:
            yield name, self.storage
