"""The README points only at files a user of a clone has: no path outside the checkout, every bundled path it
names exists."""

from __future__ import annotations

import re

from tests.support.checkout import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_names_no_file_outside_the_checkout() -> None:
    for outside in ("../shared", "DESIGN.md", "seeds/", "STYLE.md"):
        assert outside not in README, outside


def test_every_bundled_path_the_readme_names_exists() -> None:
    named = set(
        re.findall(
            r"`((?:stef|flows|tasks|warehouse|rules|tests|scripts)/[\w./-]+\.(?:py|json|jsonl|sql|md|j2))`", README
        )
    )
    assert named, "the README names bundled files"
    missing = sorted(path for path in named if "*" not in path and not (REPO_ROOT / path).exists())
    assert missing == []
