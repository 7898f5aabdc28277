"""Static files storage: hashed, gzip-compressed copies after ``collectstatic`` (WhiteNoise then
serves them with a one-year immutable Cache-Control and the .gz when the browser accepts it);
plain names when nothing was collected, so pages render before collectstatic has run (tests, a
fresh checkout). A file the manifest does not know is linked by its plain name, never an error.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def stored_name(self, name: str) -> str:
        try:
            return super().stored_name(name)
        except ValueError:  # not collected: the finders serve it under its own name
            return name
