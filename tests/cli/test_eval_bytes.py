"""`rulesched eval` prints a bytes result as base64 on both engines (cel-cpp hands bytes over as a
`bytearray`, celpy as `bytes`)."""

from __future__ import annotations

import json

import pytest

from rulesched.cli import main
from rulesched.rules.cel import ENGINE_NAMES


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize(
    ("source", "printed"), [("b'a'", "YQ=="), ("[b'a', b'b'].max()", "Yg=="), ("{'k': b'\\x00'}", {"k": "AA=="})]
)
def test_a_bytes_result_is_base64(
    capsys: pytest.CaptureFixture[str], engine_name: str, source: str, printed: object
) -> None:
    assert main(["eval", source, "--cel-engine", engine_name, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"value": printed}
