"""Reading Slurm's own output (tui/managers/slurm_job.py): real `scontrol show job -o` / `show node -o` lines of Slurm
22.05 captured on the test cluster (tests/fixtures/slurm/, each with its source on its first line), and the batch
script bringup submits (slurm_script.py) run by bash as a node would run it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tui.lifecycle.lines import node_tag
from tui.managers.process import parse_log_line
from tui.managers.slurm_job import (
    cancelled_by,
    expand_hostlist,
    fields,
    killed_by,
    parse_job,
    parse_node,
    queued_words,
    submitted_id,
    verdict,
)
from tui.managers.slurm_log import Stamps
from tui.managers.slurm_script import JobSpec, node_script, sbatch_argv, script, shell_word
from tui.model import FailureKind, LogLine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def fixture(name: str) -> str:
    lines = (FIXTURES / name).read_text(encoding="utf-8").split("\n")
    assert lines[0].startswith("# ") and "Slurm 22.05" in lines[0], f"{name}: its source on its first line"
    return "\n".join(lines[1:]).strip("\n")


def job(name: str):  # type: ignore[no-untyped-def]
    got = parse_job(fixture(name))
    assert got is not None
    return got


def test_a_pending_job_is_queued_with_its_reason_and_no_node() -> None:
    j = job("job_pending_resources.txt")
    assert (j.id, j.name, j.user, j.state, j.reason) == ("2", "cap-wait", "tester", "PENDING", "Resources")
    assert j.queued and j.live and j.nodes == ()
    assert j.submitted_at == 1796673355.0 and j.started_at is None  # StartTime=Unknown
    assert queued_words(j) == "queued: Resources (the nodes or GPUs it asks for are held by other jobs)"
    assert queued_words(j, "14:05:12").endswith("; Slurm expects it to start at 14:05:12")


def test_a_reason_slurm_writes_as_a_sentence_reads_as_one() -> None:
    j = job("job_pending_reqnodenotavail.txt")
    assert j.reason == "ReqNodeNotAvail,_UnavailableNodes:n2"  # state_desc, its spaces made underscores
    assert queued_words(j).startswith("queued: ReqNodeNotAvail, UnavailableNodes:n2 (a node it needs is "
                                      "unavailable")


def test_a_running_job_has_its_nodes_and_start() -> None:
    j = job("job_running.txt")
    assert j.state == "RUNNING" and not j.queued and j.live
    assert j.nodes == ("n1",) and j.batch_host == "n1"
    assert j.started_at == 1796673355.0 and j.ended_at is None
    assert j.invocation == "1"
    assert verdict(j) is None


def test_endings_by_slurms_word() -> None:
    done = job("job_completed.txt")
    assert (done.state, done.exit_code, done.live) == ("COMPLETED", 0, False) and verdict(done) is None
    failed = job("job_failed_exit2.txt")
    v = verdict(failed)
    assert v is not None and v.kind == FailureKind.EXIT and (failed.exit_code, failed.exit_signal) == (2, 0)
    assert v.words == "job 3 FAILED: exit code 2 (NonZeroExitCode)"
    killed = job("job_failed_signal9.txt")
    assert (killed.exit_code, killed.exit_signal) == (0, 9)
    assert verdict(killed).words == "job 6 FAILED: exit code 0, signal 9 (JobLaunchFailure)"  # type: ignore[union-attr]
    cancelled = job("job_cancelled.txt")
    assert (cancelled.state, cancelled.exit_signal, cancelled.ended_at) == ("CANCELLED", 15, 1796673362.0)
    v = verdict(cancelled)
    assert v is not None and v.kind == FailureKind.CANCELLED
    assert "by someone other than bringup" in v.words
    v = verdict(cancelled, by="root (uid 0)")
    assert v is not None and v.words == "job 1 was cancelled by root (uid 0) (CANCELLED)"


def test_a_time_limit_a_lost_node_and_a_requeue_by_slurms_word() -> None:
    t = job("job_timeout.txt")
    assert (t.state, t.reason, t.time_limit, t.exit_signal) == ("TIMEOUT", "TimeLimit", "00:01:00", 15)
    v = verdict(t)
    assert v is not None and v.kind == FailureKind.TIME_LIMIT
    assert v.words == "Slurm ended job 86 at its time limit (00:01:00) (TIMEOUT)"
    nf = job("job_node_fail.txt")
    assert (nf.state, nf.reason, nf.nodes) == ("NODE_FAIL", "NodeDown", ("n2",))
    down = parse_node(fixture("node_down.txt"))
    assert down is not None and down.down and down.state == "DOWN+NOT_RESPONDING"
    v = verdict(nf, node_down=down.name)
    assert v is not None and v.kind == FailureKind.NODE_FAIL
    assert v.words == "Slurm ended job 87: its node n2 failed (NODE_FAIL)"
    requeued = job("job_pending_requeued.txt")  # submitted without --no-requeue: run again under its own id
    assert (requeued.state, requeued.restarts, requeued.invocation) == ("PENDING", 1, "85+1") and requeued.queued
    assert queued_words(requeued).startswith("queued: BeginTime (its start time has not come)")


def test_completing_is_a_flag_over_the_jobs_state() -> None:
    c = job("job_completing.txt")
    assert c.completing and c.live and not c.queued and c.invocation == "85+1"


def test_two_nodes_head_first() -> None:
    two = job("job_two_nodes.txt")
    assert two.nodes == ("n1", "n2") and two.batch_host == "n1"


def test_slurmctlds_log_names_who_cancelled_a_refused_request_aside() -> None:
    log = fixture("ctld_log_kill.txt")
    assert killed_by(log, "5") == "1002" and killed_by(log, "6") == "0" and killed_by(log, "7") == ""


def test_no_accounting_names_no_one() -> None:
    assert cancelled_by(fixture("sacct_disabled.txt")) == ""
    # what sacct prints with accounting (src/sacct/print.c, `"%s by %u"`): not seen on this cluster
    assert cancelled_by("CANCELLED by 1001") == "1001"


def test_a_node_is_reached_at_its_nodeaddr_and_counts_its_gpus() -> None:
    n = parse_node(fixture("node_mixed.txt"))
    assert n is not None and (n.name, n.addr, n.state, n.gpus) == ("n1", "127.0.0.1", "MIXED", 4) and not n.down


@pytest.mark.parametrize(("state", "down"), [("IDLE", False), ("DOWN+NOT_RESPONDING", True), ("IDLE*", True),
                                            ("MIXED+DRAIN", False), ("DOWN", True)])
def test_a_node_slurm_does_not_reach_is_down(state: str, down: bool) -> None:
    n = parse_node(f"NodeName=n2 Gres=gpu:4 NodeAddr=127.0.0.1 State={state} Partitions=gpu")
    assert n is not None and n.down is down


def test_a_value_may_hold_an_equals_sign_but_never_a_key() -> None:
    f = fields(fixture("job_running.txt"))
    assert f["TRES"] == "cpu=1,node=1,billing=1" and f["AllocNode:Sid"] == "bringup-slurm:1700"
    assert f["StdOut"] == "/shared/h2cap/j-1.out" and f["Power"] == ""


@pytest.mark.parametrize(("text", "names"), [("n1", ("n1",)), ("n[1-2]", ("n1", "n2")), ("", ()), ("(null)", ()),
                                             ("gpu[01-03,07]", ("gpu01", "gpu02", "gpu03", "gpu07")),
                                             ("a1,b[2-3]", ("a1", "b2", "b3")), ("n[2-1]", ())])
def test_node_lists_expand_as_scontrol_show_hostnames_would(text: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == names


def test_sbatch_parsable_gives_the_id() -> None:
    assert submitted_id("12\n") == "12" and submitted_id("12;cluster\n") == "12" and submitted_id("oops") == ""


# ---------------------------------------------------------------------------------------------------- the script


SPEC = JobSpec(name="bringup-k", argv=("python3", "server.py", "--port", "30007", "--nnodes", "{nnodes}",
                                       "--node-rank", "{node_rank}", "--dist-init-addr", "{head}:5000", "it's $HOME",
                                       "{workers:--headless}"),
               log_dir="/shared/b/k", env={"HF_HOME": "/a b"}, partition="gpu", node_count=2, gpus_per_node=4,
               time="10", extra=("--qos=high",))


def test_sbatch_gets_the_jobs_shape_and_the_deployments_own_options_last() -> None:
    assert sbatch_argv(SPEC) == ["sbatch", "--parsable", "--job-name=bringup-k", "--output=/shared/b/k/job-%j.out",
                                 "--nodes=2", "--ntasks-per-node=1", "--no-requeue", "--partition=gpu",
                                 "--gres=gpu:4", "--time=10", "--qos=high"]


def test_a_placeholder_is_the_nodes_variable_and_every_other_word_is_quoted() -> None:
    assert shell_word("{head}:5000") == '"${BRINGUP_HEAD}":5000'
    assert shell_word("{head} x") == '"${BRINGUP_HEAD}"\' x\''
    assert shell_word("$(rm -rf ~)") == "'$(rm -rf ~)'"
    with pytest.raises(ValueError, match="not a variable name"):
        script(JobSpec(name="x", argv=("a",), log_dir="/l", env={"A;rm": "x"}))


@pytest.mark.parametrize(("rank", "headless"), [("0", False), ("1", True)])
def test_each_node_runs_the_command_with_its_place_and_stamps_its_output(tmp_path: Path, rank: str,
                                                                        headless: bool) -> None:
    """The node script as srun's task runs it (bash, Slurm's variables set), the server a stand-in that prints its
    argv, a line with carriage returns and a last line with no end, then exits 3."""
    prog = tmp_path / "server.py"
    prog.write_text("import sys\nprint(sys.argv[1:])\nsys.stdout.write('a\\rb\\n')\nsys.stdout.write('end')\n"
                    "sys.exit(3)\n")
    spec = JobSpec(name="k", argv=("python3", str(prog), *SPEC.argv[2:]), log_dir=str(tmp_path))
    env = {**os.environ, "SLURM_NODEID": rank, "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "12",
           "BRINGUP_HEAD": "10.1.2.3", "BRINGUP_RUN": "12", "SLURMD_NODENAME": f"n{rank}"}
    r = subprocess.run(["bash", "-c", node_script(spec), "bringup-node"], env=env, timeout=30, capture_output=True)
    assert r.returncode == 3  # the server's own status: Slurm's ExitCode is the server's
    lines = [parse_log_line(x, "12") for x in (tmp_path / f"job-12.n{rank}.log").read_text().split("\n") if x]
    assert all(ln is not None for ln in lines)
    texts = [ln.text for ln in lines if ln is not None]
    expected = ["--port", "30007", "--nnodes", "2", "--node-rank", rank, "--dist-init-addr", "10.1.2.3:5000",
                "it's $HOME", *(["--headless"] if headless else [])]
    assert texts == [str(expected), "a", "b", "end"]


def test_the_batch_script_is_bash_that_parses() -> None:
    r = subprocess.run(["bash", "-n"], input=script(SPEC), text=True, capture_output=True, timeout=10)
    assert r.returncode == 0, r.stderr


def test_the_batch_outputs_lines_are_slurms_words_tagged_and_timed() -> None:
    """The batch output holds srun's and slurmstepd's unstamped lines among bringup's stamped ones: each gets the
    last stamp seen, tagged ⟦batch⟧; `tail -F`'s own words about a file not there yet are no line."""
    stamps = Stamps("85")
    raws = ["1796675185.5 bringup: job 85 on n[1-2]: head n1 (127.0.0.1)",
            "tail: cannot open '/shared/x/job-85.n2.log' for reading: No such file or directory",
            *fixture("batch_out_node_failure.txt").split("\n")]
    lines = [x for raw in raws if (x := stamps.line(raw, node_tag("batch"), now=2e9)) is not None]
    assert [ln.at for ln in lines] == [1796675185.5] * 8
    assert lines[0].text == "\u27e6batch\u27e7 bringup: job 85 on n[1-2]: head n1 (127.0.0.1)"
    assert lines[4].text.endswith("*** JOB 85 ON n1 CANCELLED AT 2026-12-07T20:27:00 DUE TO NODE FAILURE, SEE "
                                  "SLURMCTLD LOG FOR DETAILS ***")
    assert not any("tail:" in ln.text for ln in lines)
    assert Stamps("1").line(fixture("batch_out_cancelled.txt"), "", now=5.0) == LogLine(
        5.0, "slurmstepd-n1: error: *** JOB 1 ON n1 CANCELLED AT 2026-12-07T19:56:03 ***", "1")
