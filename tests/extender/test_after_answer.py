"""What a filter or prioritize call does once its answer is sent (`after.AfterAnswer`)."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from rulesched.extender.after import AfterAnswer


def test_the_steps_run_in_order_a_failing_one_is_logged_and_the_collector_is_on_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    def failing() -> None:
        ran.append("failing")
        raise RuntimeError("a bug in a step")

    garbage: list[object] = [{"the": "decoded request"}]
    after = AfterAnswer(garbage, [lambda: ran.append("first"), failing, lambda: ran.append("last")])
    gc.disable()  # as while the call was answered
    try:
        with caplog.at_level(logging.ERROR, logger="rulesched.extender.after"):
            asyncio.run(after())
        assert gc.isenabled()
    finally:
        gc.enable()
    assert ran == ["first", "failing", "last"]
    assert garbage == []  # the request freed
    assert after.steps == []  # and what the steps held
    [record] = caplog.records
    assert record.getMessage() == "internal error after an answer was sent"
    assert record.exc_info is not None
