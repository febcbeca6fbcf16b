"""The assignments the grading tests share: built once per session (the wheel once for both)."""

from __future__ import annotations

import pytest

from submissions import CH06, PROBLEMS, assignments


@pytest.fixture(scope="session")
def built():
    import bundle

    wheel = bundle.build_wheel(assignments.OUT / "wheel")
    return {src: assignments.assign(src, wheel) for src in (CH06, PROBLEMS)}
