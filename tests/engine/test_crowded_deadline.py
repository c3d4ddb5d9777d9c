"""A harness step's limit counts the time the machine let it run, within a wall backstop."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.engine.pressure import CrowdedDeadline


def psi(path: Path, total_us: int) -> None:
    path.write_text(
        f"some avg10=0.00 avg60=0.00 avg300=0.00 total={total_us}\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_time_the_machine_kept_the_step_waiting_is_not_counted(tmp_path: Path) -> None:
    pressure, clock = tmp_path / "cpu", Clock()
    psi(pressure, 0)
    deadline = CrowdedDeadline(300.0, 1800.0, clock, pressure)
    # 400 s of wall time, 95 % of it crowded: 20 s counted, the step goes on.
    clock.now += 400
    psi(pressure, int(380 * 1e6))
    assert not deadline.expired() and round(deadline.counted_s()) == 20
    assert "20 s counted of its 300 s limit" in deadline.describe()


def test_a_step_that_hangs_on_a_quiet_machine_fails_within_its_limit(tmp_path: Path) -> None:
    pressure, clock = tmp_path / "cpu", Clock()
    psi(pressure, 0)
    deadline = CrowdedDeadline(300.0, 1800.0, clock, pressure)
    clock.now += 300
    assert deadline.expired()


@settings(max_examples=40, deadline=None)
@given(share=st.floats(0.0, 1.0), wall=st.floats(0.0, 5000.0))
def test_the_backstop_holds_whatever_the_pressure(share: float, wall: float) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        pressure, clock = Path(folder) / "cpu", Clock()
        psi(pressure, 0)
        deadline = CrowdedDeadline(300.0, 1800.0, clock, pressure)
        clock.now += wall
        psi(pressure, int(wall * share * 1e6))
        counted = wall * (1 - share)
        if wall >= 1800.0 or counted >= 300.0 + 1e-6:
            assert deadline.expired()
        elif counted < 300.0 - 1e-3:
            assert not deadline.expired()
