"""The wheel-facts extractor on tiny wheels written here: each shape of code the real releases use (argparse calls,
dataclass-derived options, f-string and %-style log calls, Prometheus metrics and the methods that move them) with
the facts it must yield. Nothing is imported from the synthetic packages: the extractor reads them as text."""

from __future__ import annotations

import hashlib
import io
import json
import string
import textwrap
import zipfile

import pytest

from tools.serverfacts.extract import dumps, facts_from_wheel
from tools.serverfacts.logformats import percent_to_format
from tools.serverfacts.wheel import WheelError


def wheel(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, text in files.items():
            zf.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), textwrap.dedent(text))
    return buf.getvalue()


SGLANG = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/choices.py": """
        ATTENTION_BACKENDS = ["fa3", "triton"]
        EXTRA = ATTENTION_BACKENDS + ["flashinfer"]
    """,
    "sglang/srt/server_args.py": """
        import argparse
        import dataclasses
        import json
        from enum import Enum, auto
        from typing import Annotated, Literal, Optional

        from sglang.srt.choices import EXTRA

        A = Annotated


        class Arg:
            def __init__(self, help="", choices=None, aliases=None):
                pass


        class SpecAlgo(Enum):
            EAGLE = auto()
            DFLASH = auto()


        class DeprecatedAction(argparse.Action):
            def __init__(self, option_strings, dest, nargs=0, **kwargs):
                super().__init__(option_strings, dest, nargs=nargs, **kwargs)


        def add_cli_args_from_dataclass(parser, cls):
            pass


        @dataclasses.dataclass
        class ServerArgs:
            mem_fraction_static: A[Optional[float], "The fraction of memory for static allocation."] = None
            enable_metrics: A[bool, "Enable prometheus metrics."] = False
            cuda_graph_backend: A[Literal["full", "disabled"], Arg(help="Backend.")] = "full"
            dp_size: A[int, Arg(help="DP size.", aliases=["--data-parallel-size"])] = 1
            internal: int = 0

            @staticmethod
            def add_cli_args(parser: argparse.ArgumentParser):
                add_cli_args_from_dataclass(parser, ServerArgs)
                parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
                parser.add_argument("--attention-backend", type=str, choices=EXTRA)
                parser.add_argument("--speculative-algorithm", choices=[a.name for a in SpecAlgo])
                parser.add_argument("--disable-cuda-graph", action="store_true",
                                    help="Deprecated. Use --cuda-graph-backend=disabled.")
                parser.add_argument("--old-flag", action=DeprecatedAction, help="Removed in 0.5.")
                parser.add_argument("--json-model-override-args", type=json.loads)
                parser.add_argument("--cuda-graph-bs", type=int, nargs="+")


        def prepare_server_args(argv):
            parser = argparse.ArgumentParser()
            ServerArgs.add_cli_args(parser)
            return ServerArgs(**vars(parser.parse_args(argv)))
    """,
    "sglang/srt/entrypoints/__init__.py": "",
    "sglang/srt/entrypoints/engine.py": """
        import logging

        logger = logging.getLogger(__name__)


        def launch(server_args, elapsed, mem, n):
            logger.info(f"{server_args=}")
            logger.info(f"Load weight end. elapsed={elapsed:.2f} s, mem usage={mem:.2f} GB.")
            logger.info("Capture cuda graph bs %s took %5.1f s (%d%% done)", n, elapsed, 50)
            logger.warning("literal {braces} stay: " + str(n) + " items")
            logger.info("tiny")
            print("Server started on port {}".format(n))
            for _ in tqdm(range(n), desc="Loading safetensors checkpoint shards"):
                pass
            if mem < 0:
                raise RuntimeError(f"Not enough memory: {mem} GB left")
    """,
    "sglang/srt/entrypoints/http_server.py": """
        from fastapi import FastAPI

        app = FastAPI()


        @app.get("/health")
        async def health():
            return {}


        @app.api_route("/generate", methods=["POST", "PUT"])
        async def generate():
            return {}
    """,
    "sglang/srt/metrics_collector.py": """
        from prometheus_client import Counter, Gauge


        class TokenizerMetricsCollector:
            def __init__(self, labels):
                self.labels = labels
                self.generation_tokens_total = Counter(
                    name="sglang:generation_tokens_total",
                    documentation="Generated tokens.",
                    labelnames=list(labels.keys()) + ["is_streaming"],
                )
                self.num_running_reqs = Gauge(
                    name="sglang:num_running_reqs", documentation="Running.", labelnames=labels.keys())

            def observe_one_finished_request(self, labels, n):
                self.generation_tokens_total.labels(**labels, is_streaming="false").inc(n)

            def _log_gauge(self, gauge, value):
                gauge.labels(**self.labels).set(value)

            def log_stats(self, stats):
                self._log_gauge(self.num_running_reqs, stats.running)


        def make_collector(server_args):
            labels = {"model_name": server_args.served_model_name, "engine_type": "unified"}
            if server_args.enable_priority_scheduling:
                labels["priority"] = ""
            if server_args.dp_size > 1:
                labels.update({"dp_rank": server_args.dp_rank})
            return TokenizerMetricsCollector(labels=labels)
    """,
}

VLLM = {
    "vllm/__init__.py": "",
    "vllm/config.py": """
        from dataclasses import dataclass, field
        from typing import Literal

        Backend = Literal["mp", "ray"]


        @dataclass
        class ParallelConfig:
            tensor_parallel_size: int = 1
            \"\"\"Number of tensor parallel groups.\"\"\"
            enable_expert_parallel: bool = False
            \"\"\"Use expert parallelism.\"\"\"
            distributed_executor_backend: Backend | None = None
            \"\"\"Backend for distributed model workers.\"\"\"
            cudagraph_capture_sizes: list[int] = field(default_factory=list)
            \"\"\"Sizes to capture. Deprecated: use the compilation config.\"\"\"
    """,
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": """
        import argparse
        from dataclasses import is_dataclass

        from vllm.config import ParallelConfig


        def get_kwargs(cls):
            # the real one: bool -> argparse.BooleanOptionalAction, a dataclass -> JSON, Literal -> choices
            return {}


        class EngineArgs:
            @staticmethod
            def add_cli_args(parser):
                kw = get_kwargs(ParallelConfig)
                group = parser.add_argument_group(title="ParallelConfig")
                group.add_argument("--tensor-parallel-size", "-tp", **kw["tensor_parallel_size"])
                group.add_argument("--enable-expert-parallel", "-ep", **kw["enable_expert_parallel"])
                group.add_argument("--distributed-executor-backend", **kw["distributed_executor_backend"])
                group.add_argument("--cudagraph-capture-sizes", **kw["cudagraph_capture_sizes"])
                group.add_argument("--data-parallel-start-rank", "-dpr", type=int)
                group.add_argument("--disable-log-stats", action="store_true")
                return parser
    """,
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": """
        from argparse import ArgumentParser


        class FlexibleArgumentParser(ArgumentParser):
            def parse_args(self, args=None, namespace=None):
                args = [a.replace("_", "-") if a.startswith("--") else a for a in args]
                return super().parse_args(args, namespace)
    """,
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": """
        from vllm.engine.arg_utils import EngineArgs
        from vllm.logger import init_logger
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        logger = init_logger(__name__)


        class ServeSubcommand:
            def subparser_init(self, subparsers) -> FlexibleArgumentParser:
                serve_parser = subparsers.add_parser("serve", usage="vllm serve [model_tag]")
                serve_parser.add_argument("model_tag", type=str, nargs="?")
                serve_parser.add_argument("--headless", action="store_true")
                return EngineArgs.add_cli_args(serve_parser)


        def run(args, version):
            logger.info("vLLM API server version %s", version)
            logger.info("non-default args: %s", args)
    """,
    "vllm/v1/__init__.py": "",
    "vllm/v1/metrics/__init__.py": "",
    "vllm/v1/metrics/loggers.py": """
        import prometheus_client


        def create_metric_per_engine(metric, per_engine_labelvalues):
            return {idx: metric.labels(*v) for idx, v in per_engine_labelvalues.items()}


        class PrometheusStatLogger:
            _counter_cls = prometheus_client.Counter

            def __init__(self, engine_indexes):
                labelnames = ["model_name", "engine"]
                per_engine = {i: ["m", str(i)] for i in engine_indexes}
                counter_generation_tokens = self._counter_cls(
                    name="vllm:generation_tokens", documentation="Generation tokens.", labelnames=labelnames)
                self.counter_generation_tokens = create_metric_per_engine(counter_generation_tokens, per_engine)

            def record(self, stats, engine_idx=0):
                self.counter_generation_tokens[engine_idx].inc(stats.num_generation_tokens)
    """,
}


@pytest.fixture(scope="module")
def sglang_facts() -> dict:
    facts, _notes = facts_from_wheel(wheel(SGLANG), "sglang-9.9.9-py3-none-any.whl", "sglang")
    return facts


@pytest.fixture(scope="module")
def vllm_facts() -> dict:
    facts, _notes = facts_from_wheel(wheel(VLLM), "vllm-9.9.9-cp38-abi3-manylinux1_x86_64.whl", "vllm")
    return facts


def option(facts: dict, flag: str) -> dict:
    hits = [o for o in facts["options"] if flag in o["flags"]]
    assert len(hits) == 1, f"{flag}: {hits}"
    return hits[0]


# -- options -------------------------------------------------------------------------------------------------------


def test_sglang_explicit_add_argument(sglang_facts: dict) -> None:
    tp = option(sglang_facts, "--tp-size")
    assert tp["flags"] == ["--tp-size", "--tensor-parallel-size"]
    assert (tp["dest"], tp["kind"], tp["choices"], tp["deprecated"]) == ("tp_size", "int", None, False)
    assert tp["source"] == "sglang/srt/server_args.py:43"
    # a list constant imported from another module, extended by concatenation
    assert option(sglang_facts, "--attention-backend")["choices"] == ["fa3", "flashinfer", "triton"]
    spec = option(sglang_facts, "--speculative-algorithm")
    assert (spec["kind"], spec["choices"]) == ("choice", ["DFLASH", "EAGLE"])
    assert option(sglang_facts, "--json-model-override-args")["kind"] == "json"
    bs = option(sglang_facts, "--cuda-graph-bs")
    assert (bs["kind"], bs["nargs"]) == ("list", "+")


def test_sglang_store_true_and_deprecations(sglang_facts: dict) -> None:
    dcg = option(sglang_facts, "--disable-cuda-graph")
    assert (dcg["kind"], dcg["negatable"], dcg["deprecated"]) == ("bool", False, True)
    assert dcg["deprecated_note"] == "Deprecated. Use --cuda-graph-backend=disabled."
    old = option(sglang_facts, "--old-flag")  # a DeprecatedAction (nargs=0): a flag without a value
    assert (old["kind"], old["deprecated"], old["deprecated_note"]) == ("bool", True, "Removed in 0.5.")


def test_sglang_dataclass_fields(sglang_facts: dict) -> None:
    assert option(sglang_facts, "--mem-fraction-static")["kind"] == "float"  # Optional[float] -> float
    assert option(sglang_facts, "--enable-metrics")["kind"] == "bool"
    backend = option(sglang_facts, "--cuda-graph-backend")
    assert (backend["kind"], backend["choices"]) == ("choice", ["disabled", "full"])
    dp = option(sglang_facts, "--dp-size")
    assert dp["flags"] == ["--dp-size", "--data-parallel-size"] and dp["dest"] == "dp_size"
    assert dp["source"].startswith("sglang/srt/server_args.py:")
    # a field without A[...] metadata gets no option
    assert not [o for o in sglang_facts["options"] if o["dest"] == "internal"]
    argp = {k: v for k, v in sglang_facts["argparse"].items() if k not in ("prog", "top_prog", "error_override",
                                                                           "refusals")}
    assert argp == {"allow_abbrev": True, "underscore_spellings": False, "source": "sglang/srt/server_args.py"}


def test_refusal_program_and_wordings_from_the_parsers_construction(sglang_facts: dict, vllm_facts: dict) -> None:
    """argparse's `PROG: error:` lines as each release's parser prints them: SGLang's parser built without `prog`
    (argparse's default: argv[0]'s name, a field here), or `prog="sglang serve"` (0.5.17+); vLLM's `serve`
    subparser under the `vllm` script (a bad value: `vllm serve:`, an unknown flag: the top parser's `vllm:`), and
    its parser class's own `error()` recorded where it has one."""
    argp = sglang_facts["argparse"]
    assert (argp["prog"], argp["top_prog"], argp["error_override"]) == (None, None, "")
    assert "{}: error: unrecognized arguments: {}" in argp["refusals"]
    named = SGLANG["sglang/srt/server_args.py"].replace("argparse.ArgumentParser()",
                                                         'argparse.ArgumentParser(prog="sglang serve")')
    facts, _ = facts_from_wheel(wheel({**SGLANG, "sglang/srt/server_args.py": named}),
                                "sglang-9.9.9-py3-none-any.whl", "sglang")
    assert (facts["argparse"]["prog"], facts["argparse"]["top_prog"]) == ("sglang serve", "sglang serve")
    assert "sglang serve: error: ambiguous option: {} could match {}" in facts["argparse"]["refusals"]
    v = vllm_facts["argparse"]
    assert (v["prog"], v["top_prog"], v["error_override"]) == ("vllm serve", "vllm", "")
    assert "vllm: error: unrecognized arguments: {}" in v["refusals"]
    assert "vllm serve: error: argument {}: invalid {} value: {}" in v["refusals"]
    own_error = VLLM["vllm/utils/argparse_utils.py"] + """
            def error(self, message):
                super().error(message + " (hint)")
    """
    facts = vllm_with({"vllm/utils/argparse_utils.py": own_error})
    assert facts["argparse"]["error_override"].startswith("vllm/utils/argparse_utils.py:")


def test_vllm_options_from_config_dataclass(vllm_facts: dict) -> None:
    tp = option(vllm_facts, "-tp")
    assert (tp["flags"], tp["kind"], tp["dest"]) == (["--tensor-parallel-size", "-tp"], "int", "tensor_parallel_size")
    ep = option(vllm_facts, "-ep")
    assert (ep["kind"], ep["negatable"]) == ("bool", True)  # BooleanOptionalAction: --no-enable-expert-parallel
    backend = option(vllm_facts, "--distributed-executor-backend")
    assert (backend["kind"], backend["choices"]) == ("choice", ["None", "mp", "ray"])  # Optional adds "None"
    sizes = option(vllm_facts, "--cudagraph-capture-sizes")
    assert (sizes["kind"], sizes["nargs"], sizes["deprecated"]) == ("list", "+", True)
    assert sizes["deprecated_note"] == "Deprecated: use the compilation config."
    assert option(vllm_facts, "-dpr")["dest"] == "data_parallel_start_rank"
    assert option(vllm_facts, "--disable-log-stats")["negatable"] is False
    assert option(vllm_facts, "--headless")["kind"] == "bool"
    assert vllm_facts["positionals"] == [{"dest": "model_tag", "source": "vllm/entrypoints/cli/serve.py:12"}]
    assert vllm_facts["argparse"]["underscore_spellings"] is True


def test_vllm_before_the_cli_package_reads_make_arg_parser() -> None:
    files = {k: v for k, v in VLLM.items() if not k.startswith("vllm/entrypoints/cli/")}
    files["vllm/entrypoints/openai/__init__.py"] = ""
    files["vllm/entrypoints/openai/cli_args.py"] = """
        from vllm.engine.arg_utils import EngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser


        def make_arg_parser(parser: FlexibleArgumentParser) -> FlexibleArgumentParser:
            parser.add_argument("--port", type=int, default=8000)
            parser = EngineArgs.add_cli_args(parser)
            return parser
    """
    facts, _ = facts_from_wheel(wheel(files), "vllm-0.5.5-cp38-abi3-manylinux1_x86_64.whl", "vllm")
    assert facts["argparse"]["source"] == "vllm/entrypoints/openai/cli_args.py"
    assert {"--port", "--tensor-parallel-size", "-tp"} <= {f for o in facts["options"] for f in o["flags"]}


# -- log formats ---------------------------------------------------------------------------------------------------


def texts(facts: dict) -> dict[str, dict]:
    """Log formats by text, from the grouped layout (`{"file", "entries": [[line, via, text], ...]}`)."""
    return {text: {"text": text, "via": via, "source": f"{g['file']}:{line}"}
            for g in facts["log_formats"] for line, via, text in g["entries"]}


def vllm_with(extra: dict[str, str]) -> dict:
    files = {**VLLM, **extra}
    facts, _ = facts_from_wheel(wheel(files), "vllm-9.9.9-cp38-abi3-manylinux1_x86_64.whl", "vllm")
    return facts


def test_message_variables_every_assignment_and_template_logo() -> None:
    got = texts(vllm_with({"vllm/entrypoints/utils.py": """
        from string import Template

        def log_version_and_model(lgr, version, model_name, plain):
            if plain:
                message = "vLLM server version %s, serving model %s"
            else:
                logo_template = Template(
                    "\\n  ${w}AAAA${r}\\n"
                    " ${o}BB${r} ${w}CCCC${r}  version ${w}%s${r}\\n"
                    "  ${o}D${r} ${w}EEEE${r}  model   ${w}%s${r}\\n"
                )
                colors = {"w": "\\033[97;1m", "o": "", "r": ""}
                message = logo_template.substitute(colors)
            lgr.info(message, version, model_name)

        def check(port, rank, proc):
            msg = f"Port {port} is not available"
            msg += f", pick another one ({rank} tries)."
            if proc:
                msg += " (restarting)"
            logger.error(msg)
            raise RuntimeError(msg)

        def died(rank, proc):
            proc.join(timeout=10)
            return RuntimeError(
                f"Rank {rank} scheduler died during initialization "
                f"(exit code: {proc.exitcode}).")
    """}))
    assert got["vLLM server version {}, serving model {}"]["via"] == "logger.info"
    # the logo branch too, one line a template: `${o}` fields, `%s` converted around them
    logo = got[" {}BB{} {}CCCC{}  version {}{}{}"]
    assert logo["source"] == "vllm/entrypoints/utils.py:15"
    assert logo["text"].format("", "", "", "", "", "0.15.0", "") == " BB CCCC  version 0.15.0"
    assert "  {}D{} {}EEEE{}  model   {}{}{}" in got
    # and as the code's own mapping renders it: here "o" and "r" are "" and "w" an ANSI code
    assert " BB \x1b[97;1mCCCC  version \x1b[97;1m{}" in got
    built = got["Port {} is not available, pick another one ({} tries)."]
    assert built["via"] == "logger.error"
    assert "Port {} is not available" not in got  # the value before an unconditional `+=` never reaches a call
    assert "Port {} is not available, pick another one ({} tries). (restarting)" in got  # under an `if`: both
    assert got["Rank {} scheduler died during initialization (exit code: {})."]["via"] == "raise RuntimeError"


def test_long_chain_of_additions_with_conditional_parts() -> None:
    parts = "".join(f"    msg += f\"#field-{i}: {{x}}, \"\n" for i in range(12))
    got = texts(vllm_with({"vllm/v1/core/report.py": (
        "def log_prefill(logger, x, disagg):\n"
        "    msg = f\"Prefill batch, #new-seq: {x}, \"\n" + parts +
        "    if disagg:\n"
        "        msg += f\"#bootstrap-req: {x}, \"\n"
        "    msg += f\"input throughput (token/s): {x:.2f}\"\n"
        "    logger.info(msg)\n")}))
    middle = "".join(f"#field-{i}: {{}}, " for i in range(12))
    assert f"Prefill batch, #new-seq: {{}}, {middle}input throughput (token/s): {{:.2f}}" in got
    assert f"Prefill batch, #new-seq: {{}}, {middle}#bootstrap-req: {{}}, input throughput (token/s): {{:.2f}}" in got


def test_progress_bar_texts_set_after_creation() -> None:
    got = texts(vllm_with({"vllm/worker/runner.py": """
        import tqdm

        def capture(pbar, bs, avail_mem, num_tokens):
            pbar.set_description(f"Capturing batches ({bs=} {avail_mem=:.2f} GB)")
            pbar.set_description(f"Compiling num tokens ({num_tokens=})")
            pbar.set_postfix_str(f"avail mem {avail_mem:.1f} GB")
            tqdm.tqdm.write(f"Captured graph for {bs} requests")
    """}))
    assert got["Capturing batches (bs={} avail_mem={:.2f} GB)"]["via"] == "pbar.set_description"
    assert "Compiling num tokens (num_tokens={})" in got
    assert got["avail mem {:.1f} GB"]["via"] == "pbar.set_postfix_str"
    assert got["Captured graph for {} requests"]["via"] == "tqdm.write"


def test_one_drop_policy_whatever_the_size() -> None:
    facts = vllm_with({
        "vllm/engine/core.py": """
            def run(logger, x):
                logger.info("Engine core started with %d workers", x)
                logger.debug("debug details of %s", x)
                raise RuntimeError(f"Engine core failed: {x}")

            def bug(x):
                raise NotImplementedError(f"Not implemented for {x}")
        """,
        "vllm/model_executor/models/llama.py": "def f(logger):\n    logger.info('Loading llama weights now')\n",
        "vllm/models/qwen/model.py": "def f(logger):\n    logger.info('Loading qwen weights now')\n",
        "vllm/benchmarks/serve.py": "def f():\n    print('Benchmark throughput results')\n",
        "vllm/tests/test_x.py": "def f(logger):\n    logger.info('a test message here')\n",
    })
    got = texts(facts)
    assert got["Engine core started with {:d} workers"]["source"] == "vllm/engine/core.py:3"
    assert "Engine core failed: {}" in got
    for gone in ("debug details of {}", "Not implemented for {}", "Loading llama weights now",
                 "Loading qwen weights now", "Benchmark throughput results", "a test message here"):
        assert gone not in got
    # the same with the smallest budget: nothing more is cut
    small, notes = facts_from_wheel(wheel({**VLLM, "vllm/engine/core.py": "def run(logger, x):\n"
                                           "    logger.info('Engine core started with %d workers', x)\n"}),
                                    "vllm-9.9.9-cp38-abi3-manylinux1_x86_64.whl", "vllm", budget=1)
    assert "Engine core started with {:d} workers" in texts(small)
    assert any("over the" in n for n in notes)


def test_log_formats_canonical_templates(sglang_facts: dict) -> None:
    got = texts(sglang_facts)
    assert "Load weight end. elapsed={:.2f} s, mem usage={:.2f} GB." in got
    assert got["Capture cuda graph bs {} took {:5.1f} s ({:d}% done)"]["via"] == "logger.info"
    assert "literal {{braces}} stay: {} items" in got
    assert got["Server started on port {}"]["via"] == "print"
    assert got["Loading safetensors checkpoint shards"]["via"] == "desc"
    assert got["Not enough memory: {} GB left"]["via"] == "raise RuntimeError"
    assert got["server_args={}"]["source"] == "sglang/srt/entrypoints/engine.py:8"
    assert "tiny" not in got  # fewer than 6 literal characters
    for text in got:  # every template renders with as many values as it has fields
        text.format(*[1 for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None])


@pytest.mark.parametrize(("raw", "want"), [
    ("took %.2f s", "took {:.2f} s"),
    ("%d%% of %s", "{:d}% of {}"),
    ("%5.1f|%-8s|%r|%i", "{:5.1f}|{:<8}|{}|{:d}"),
    ("a {dict} %s", "a {{dict}} {}"),
])
def test_percent_to_format(raw: str, want: str) -> None:
    assert percent_to_format(raw) == want


# -- metrics -------------------------------------------------------------------------------------------------------


def metric(facts: dict, name: str) -> dict:
    hits = [m for m in facts["metrics"] if m["name"] == name]
    assert len(hits) == 1, f"{name}: {hits}"
    return hits[0]


def test_sglang_metrics_labels_from_the_collectors_constructor(sglang_facts: dict) -> None:
    gen = metric(sglang_facts, "sglang:generation_tokens_total")
    assert gen["type"] == "counter"
    # the labels the collector is built with (the priority label only under an `if`), plus its own
    assert (gen["labels"], gen["labels_resolved"]) == (["model_name", "engine_type", "is_streaming"], True)
    assert gen["collector"] == "TokenizerMetricsCollector"
    assert gen["updated_in"] == ["TokenizerMetricsCollector.observe_one_finished_request"]
    running = metric(sglang_facts, "sglang:num_running_reqs")
    assert (running["type"], running["labels"]) == ("gauge", ["model_name", "engine_type"])
    # added under a condition (`labels["priority"] = ""`, `labels.update({"dp_rank": ...})`): optional labels
    assert running["optional_labels"] == ["dp_rank", "priority"]
    assert gen["optional_labels"] == ["dp_rank", "priority"]
    assert running["updated_in"] == ["TokenizerMetricsCollector.log_stats"]  # through the _log_gauge helper


def test_vllm_metric_through_wrapper_and_per_engine_dict(vllm_facts: dict) -> None:
    gen = metric(vllm_facts, "vllm:generation_tokens")
    assert (gen["type"], gen["labels"], gen["labels_resolved"]) == ("counter", ["model_name", "engine"], True)
    assert gen["updated_in"] == ["PrometheusStatLogger.record"]
    assert gen["source"] == "vllm/v1/metrics/loggers.py:15"


# -- the rest of the facts -----------------------------------------------------------------------------------------


def test_routes_args_line_and_version_line(sglang_facts: dict, vllm_facts: dict) -> None:
    routes = {r["path"]: r["methods"] for r in sglang_facts["routes"]}
    assert routes == {"/generate": ["POST", "PUT"], "/health": ["GET"]}
    assert sglang_facts["args_line"] == {"form": "dataclass", "text": "server_args={}",
                                         "source": "sglang/srt/entrypoints/engine.py:8"}
    assert sglang_facts["version_line"] is None
    assert vllm_facts["args_line"]["form"] == "non_default_dict"
    assert vllm_facts["version_line"]["text"] == "vLLM API server version {}"


def test_args_line_dict_form() -> None:
    files = dict(SGLANG)
    files["sglang/srt/entrypoints/engine.py"] = """
        import logging
        logger = logging.getLogger(__name__)

        def launch(server_args):
            logger.info(f"server_args={server_args.resolved_dict()}")
    """
    facts, _ = facts_from_wheel(wheel(files), "sglang-9.9.9-py3-none-any.whl", "sglang")
    assert facts["args_line"]["form"] == "dict"


def test_provenance_and_deterministic_output(sglang_facts: dict) -> None:
    data = wheel(SGLANG)
    facts, _ = facts_from_wheel(data, "sglang-9.9.9-py3-none-any.whl", "sglang")
    assert facts["wheel"] == {"file": "sglang-9.9.9-py3-none-any.whl", "sha256": hashlib.sha256(data).hexdigest()}
    assert (facts["schema"], facts["server"], facts["version"]) == (1, "sglang", "9.9.9")
    text = dumps(facts)
    assert json.loads(text) == facts
    again, _ = facts_from_wheel(data, "sglang-9.9.9-py3-none-any.whl", "sglang")
    assert dumps(again) == text
    assert [o["flags"][0] for o in facts["options"]] == sorted(o["flags"][0] for o in facts["options"])
    # compact: one record a line, one log format a line
    lines = text.splitlines()
    assert sum(1 for ln in lines if ln.startswith("[") and ln.rstrip(",]}").endswith('"')) == len(texts(facts))


def test_loader_reads_grouped_log_formats(sglang_facts: dict) -> None:
    from tui.lifecycle.presets.facts import _load, _log_formats

    raw = json.loads(dumps(sglang_facts))
    loaded = _load(raw)
    by_text = {f.text: f for f in _log_formats(raw["log_formats"])}
    assert by_text["Not enough memory: {} GB left"].source.startswith("sglang/srt/entrypoints/engine.py:")
    assert by_text["Not enough memory: {} GB left"].via == "raise RuntimeError"
    assert loaded.has_metric("sglang:num_running_reqs").optional_labels == ("dp_rank", "priority")


@pytest.mark.parametrize(("contents", "name", "server", "message"), [
    ("sglang", "sglang-9.9.9-py3-none-any.whl", "vllm", "a wheel of sglang, not of vllm"),
    ("garbage", "vllm-1.0-py3-none-any.whl", "vllm", "not a zip file"),
    ("other", "vllm-1.0-py3-none-any.whl", "vllm", "has no vllm/__init__.py"),
    ("sglang", "sglang-9.9.9.tar.gz", "sglang", "not a wheel"),
], ids=["other-server", "not-a-zip", "not-that-package", "not-a-wheel-name"])
def test_clear_errors(contents: str, name: str, server: str, message: str) -> None:
    data = {"sglang": wheel(SGLANG), "other": wheel({"other/__init__.py": ""}), "garbage": b"not a zip"}[contents]
    with pytest.raises(WheelError, match=message) as e:
        facts_from_wheel(data, name, server)
    assert "\n" not in str(e.value)
