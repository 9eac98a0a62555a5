"""The console's picture of the deployment it shows (tui/console/shown.py), fed as the engine feeds it: which steps
survive a new run, which panels a change makes due, and which notes go to which panel."""

from __future__ import annotations

from dataclasses import replace

from tui.console.shown import CHART_SAMPLES, SPARK_SAMPLES, Panel, Shown
from tui.model import GpuSnapshot, Note, NoteSource, Phase, Step, StepStatus, ThroughputSample


def test_a_run_this_console_did_not_start_drops_the_steps_of_its_own_last_action() -> None:
    shown = Shown.nothing_yet("d", "h")
    run1 = replace(shown.snap, phase=Phase.READY, invocation="run-1")
    shown.phase_changed(run1, acting=True)
    shown.stepped(Step("start", StepStatus.DONE))
    # its own restart's new run keeps the steps that made it
    assert shown.phase_changed(replace(run1, invocation="run-2"), acting=True) is run1  # the picture it replaced
    assert [s.name for s in shown.steps] == ["start"]
    # someone else's run: the steps are history
    shown.phase_changed(replace(run1, invocation="run-3"), acting=False)
    assert shown.steps == []


def test_a_phase_change_makes_the_throughput_due_and_a_same_phase_picture_only_the_lifecycle() -> None:
    shown = Shown.nothing_yet("d", "h")
    ready = replace(shown.snap, phase=Phase.READY, invocation="run-1")
    before = shown.phase_changed(ready, acting=False)
    assert before.phase == Phase.UNKNOWN
    assert shown.due == {Panel.LIFECYCLE, Panel.THROUGHPUT}
    shown.due.clear()
    shown.phase_changed(replace(ready, stalled_for=3.0), acting=False)
    assert shown.due == {Panel.LIFECYCLE}


def test_samples_keep_only_what_the_panels_draw() -> None:
    shown = Shown.nothing_yet("d", "h")
    gpus = GpuSnapshot(at=1.0, gpus=())
    shown.gpus_sampled(gpus, {0: tuple(float(i) for i in range(SPARK_SAMPLES + 40))})
    assert shown.gpu_snap is gpus and len(shown.gpu_history[0]) == SPARK_SAMPLES
    assert shown.gpu_history[0][-1] == SPARK_SAMPLES + 39  # the newest are kept
    sample = ThroughputSample(at=2.0, tokens_per_s=10.0, source="metrics")
    shown.throughput_sampled(sample, tuple((float(i), 1.0) for i in range(CHART_SAMPLES + 7)))
    assert shown.tp is sample and len(shown.tp_history) == CHART_SAMPLES and shown.tp_history[0][0] == 7.0
    assert shown.due == {Panel.GPUS, Panel.THROUGHPUT}


def test_a_release_step_running_marks_the_gpus_as_releasing_until_the_next_step() -> None:
    shown = Shown.nothing_yet("d", "h")
    shown.stepped(Step("release", StepStatus.RUNNING))
    assert shown.releasing
    shown.stepped(Step("release", StepStatus.DONE))
    assert not shown.releasing


def test_each_note_goes_to_its_panel_and_the_pause_follows_the_consoles_own() -> None:
    notes = (Note(NoteSource.UNIT, "unit: ssh timed out"), Note(NoteSource.THROUGHPUT, "an old figure"),
             Note(NoteSource.THROUGHPUT, "the newest figure's note"), Note(NoteSource.PROBE, "probe: refused"))
    shown = Shown(replace(Shown.nothing_yet("d", "h").snap, phase=Phase.READY, notes=notes))
    assert shown.lifecycle_note("", paused=False) == "unit: ssh timed out\nprobe: refused"
    assert shown.lifecycle_note("starting…", paused=True) == ("starting…  PAUSED (p to resume)\nunit: ssh timed out"
                                                              "\nprobe: refused")
    assert shown.lifecycle_note("", paused=True).startswith("PAUSED (p to resume)\n")
    assert shown.throughput_note() == "the newest figure's note"


def test_a_ready_server_without_samples_or_a_note_says_where_figures_would_come_from() -> None:
    shown = Shown(replace(Shown.nothing_yet("d", "h").snap, phase=Phase.READY))
    assert "no metrics yet" in shown.throughput_note()
    shown.throughput_sampled(ThroughputSample(at=1.0, tokens_per_s=None, source="log"), ())
    assert shown.throughput_note() == ""


def test_an_engine_that_ran_a_while_is_shown_caught_up_with_what_the_panels_draw() -> None:
    gpus = GpuSnapshot(at=5.0, gpus=())
    sample = ThroughputSample(at=5.0, tokens_per_s=12.0, source="metrics")
    snap = replace(Shown.nothing_yet("d", "h").snap, phase=Phase.READY, gpus=gpus, throughput=sample,
                   gpu_history={0: tuple(float(i) for i in range(SPARK_SAMPLES * 2))},
                   tps_history=tuple((float(i), 2.0) for i in range(CHART_SAMPLES + 1)))
    shown = Shown.caught_up(snap)
    assert shown.snap is snap and shown.gpu_snap is gpus and shown.tp is sample
    assert list(shown.gpu_history[0]) == [float(i) for i in range(SPARK_SAMPLES, SPARK_SAMPLES * 2)]
    assert len(shown.tp_history) == CHART_SAMPLES and shown.tp_history[-1][0] == CHART_SAMPLES
    assert shown.steps == [] and not shown.due  # nothing of its own action; the app draws it all at once
