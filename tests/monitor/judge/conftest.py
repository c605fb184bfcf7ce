from __future__ import annotations

from pathlib import Path

import pytest

from monitor.judge import Judge
from tests.monitor.judge.helpers import judge_for


@pytest.fixture(scope="module")
def base_judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    return judge_for(Path(tmp_path_factory.mktemp("rules")))
