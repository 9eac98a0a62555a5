"""The command line a release's server takes: every option string, its kind and choices, and how its parser
treats spellings (abbreviations, `--foo_bar`), from the function that builds the parser.

Roots: SGLang's `prepare_server_args` (what `python -m sglang.launch_server` and `sglang serve` parse with) and
vLLM's `vllm serve` subcommand (`ServeSubcommand.subparser_init`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from tools.serverfacts.fields import sglang_dataclass_hook, vllm_get_kwargs_hook
from tools.serverfacts.interp import Interpreter, ParserObj, RawOption, TypeMarker, TypeWrapper
from tools.serverfacts.refs import UNRESOLVED, ClassRef, External, FuncRef, Instance, Scope, choice_strings, dotted
from tools.serverfacts.refusals import VLLM_SCRIPT, Refusal, explicit_prog, refusal, subparser_prog, top_prog_of
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.types import type_atoms

NOTE_MAX = 200
_NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}


@dataclass
class OptionsResult:
    options: list[dict[str, Any]] = field(default_factory=list)
    positionals: list[dict[str, str]] = field(default_factory=list)
    allow_abbrev: bool = True
    underscore_spellings: bool = False
    source: str = ""
    unresolved_flags: int = 0
    refusal: Refusal = field(default_factory=Refusal)


def extract_options(res: Resolver, server: str) -> OptionsResult:
    interp = Interpreter(res, hooks={"add_cli_args_from_dataclass": sglang_dataclass_hook,
                                     "get_kwargs": vllm_get_kwargs_hook, "_compute_kwargs": vllm_get_kwargs_hook})
    if server == "sglang":
        module = "sglang.srt.server_args"
        fn = res.lookup(module, "prepare_server_args")
        if not isinstance(fn, FuncRef):
            raise LookupError("sglang.srt.server_args.prepare_server_args not found")
        interp.call_function(fn, [UNRESOLVED])
        parser_cls: Any = External("argparse.ArgumentParser")
    else:
        module = "vllm.entrypoints.cli.serve"
        if module in res.pkg.modules:
            sub, parser_cls = _vllm_serve_root(res, module)
            interp.call_function(sub, [Instance(sub.owner), ParserObj("subparsers", parser_cls)])
        else:  # before vLLM 0.7: `vllm serve` (vllm/scripts.py) hands its subparser to `make_arg_parser`
            module = "vllm.entrypoints.openai.cli_args"
            make = res.lookup(module, "make_arg_parser")
            if not isinstance(make, FuncRef):
                raise LookupError(f"{module}.make_arg_parser not found")
            parser_cls = _flexible_parser(res, module)
            root_parser = ParserObj("parser", parser_cls, {"usage": "vllm serve <model_tag> [options]"})
            interp.parsers.append(root_parser)
            interp.call_function(make, [root_parser])
    roots = [p for p in interp.parsers if p.kind == "parser"]
    if not roots:
        raise LookupError(f"{module}: no argument parser built")
    root = roots[0] if server == "sglang" else next((p for p in roots if p.kwargs), roots[0])
    out = OptionsResult(source=res.pkg.modules.get(module, module))
    abbrev = root.kwargs.get("allow_abbrev", True)
    out.allow_abbrev = abbrev if isinstance(abbrev, bool) else True
    parse_args = _parser_method(res, parser_cls, "parse_args")
    out.refusal = _refusal(res, server, root, parser_cls)
    out.underscore_spellings = parse_args is not None and bool(
        re.search(r"""replace\(\s*["']_["']\s*,\s*["']-["']\s*\)""", ast.unparse(parse_args.node)))
    inverse = _inverse_prefixes(res, parser_cls)
    dash_o = parse_args is not None and _rewrites_dash_o(parse_args)
    for raw in interp.options:
        if raw.parser.root is not root:
            continue
        flags = [f for f in raw.flags if isinstance(f, str)]
        if len(flags) != len(raw.flags) or not flags:
            out.unresolved_flags += 1
            if not flags:
                continue
        if not flags[0].startswith("-"):
            out.positionals.append({"dest": flags[0], "source": raw.source})
            continue
        out.options.append(_option(res, raw, flags, inverse, dash_o))
    if server == "sglang":
        _sglang_spec_algorithms(res, out.options)
    out.options.sort(key=lambda o: (o["flags"][0], o["dest"], o["source"]))
    out.positionals.sort(key=lambda p: p["dest"])
    return out


def _refusal(res: Resolver, server: str, root: ParserObj, parser_cls: Any) -> Refusal:
    """The serve parser's program and the words it refuses a command line with (`refusals.py`)."""
    error = _parser_method(res, parser_cls, "error")
    override = f"{res.pkg.modules.get(error.module, error.module)}:{error.node.lineno}" if error is not None else ""
    if server == "sglang":
        prog = explicit_prog(root.kwargs)
        return refusal(prog, prog, override)
    top = top_prog_of(res.pkg.tree("vllm.entrypoints.cli.main"), VLLM_SCRIPT)
    name = root.name if isinstance(root.name, str) else "serve"
    return refusal(subparser_prog(top, name, root.kwargs), top, override)


def _vllm_serve_root(res: Resolver, module: str) -> tuple[FuncRef, Any]:
    tree = res.pkg.tree(module)
    if tree is None:
        raise LookupError(f"{module} not found")
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = ClassRef(module, node)
            fn = res.class_attr(cls, "subparser_init")
            if isinstance(fn, FuncRef) and fn.owner is not None and fn.owner.node is node:
                parser_cls = _flexible_parser(res, module)
                return FuncRef(fn.module, fn.node, cls), parser_cls
    raise LookupError(f"{module}: no subcommand class with subparser_init")


def _flexible_parser(res: Resolver, module: str) -> Any:
    got = res.lookup(module, "FlexibleArgumentParser")
    if isinstance(got, ClassRef):
        return got
    for mod in sorted(res.pkg.modules):
        tree = res.pkg.tree(mod) if mod.startswith("vllm.utils") else None
        for node in tree.body if tree is not None else []:
            if isinstance(node, ast.ClassDef) and node.name == "FlexibleArgumentParser":
                return ClassRef(mod, node)
    return External("argparse.ArgumentParser")


def _parser_method(res: Resolver, parser_cls: Any, name: str) -> FuncRef | None:
    if not isinstance(parser_cls, ClassRef):
        return None
    got = res.class_attr(parser_cls, name)
    return got if isinstance(got, FuncRef) else None


def _rewrites_dash_o(fn: FuncRef) -> bool:
    consts = {n.value for n in ast.walk(fn.node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return "-O" in consts and "--optimization-level" in consts


def _inverse_prefixes(res: Resolver, parser_cls: Any) -> dict[str, str]:
    """vLLM 0.33+: the parser registers an action class for BooleanOptionalAction that pairs `--enable-x` with
    `--disable-x` (its `_inverse_prefixes`); those spellings are real options too."""
    init = _parser_method(res, parser_cls, "__init__")
    if init is None or not isinstance(parser_cls, ClassRef):
        return {}
    for node in ast.walk(init.node):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"
                and len(node.args) == 3 and isinstance(node.args[0], ast.Constant) and node.args[0].value == "action"
                and dotted(node.args[1]).endswith("BooleanOptionalAction")):
            action = res.ref(node.args[2], Scope(init.module, parser_cls))
            if isinstance(action, ClassRef):
                got = res.eval(ast.Name("_inverse_prefixes"), Scope(action.module, action))
                if isinstance(got, dict):
                    return {str(k): str(v) for k, v in got.items()}
    return {}


@dataclass(frozen=True)
class _ActionInfo:
    no_value: bool = False
    negatable: bool = False
    deprecated: bool = False
    nargs_default: Any = None
    known: bool = True


def _action_info(res: Resolver, action: Any) -> _ActionInfo:
    if action is None or action == "store" or action in ("append", "extend"):
        return _ActionInfo()
    if isinstance(action, str):
        return _ActionInfo(no_value=action in _NO_VALUE_ACTIONS, known=action in _NO_VALUE_ACTIONS)
    if isinstance(action, External):
        if action.short == "BooleanOptionalAction":
            return _ActionInfo(no_value=True, negatable=True)
        if action.short in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_CountAction"):
            return _ActionInfo(no_value=True)
        return _ActionInfo(known=False)
    if isinstance(action, ClassRef):
        chain = res.mro(action)
        names = [c.name if isinstance(c, ClassRef) else c.short for c in chain]
        deprecated = any("deprecat" in n.lower() for n in names)
        if "BooleanOptionalAction" in names:
            return _ActionInfo(no_value=True, negatable=True, deprecated=deprecated)
        if any(n in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction") for n in names):
            return _ActionInfo(no_value=True, deprecated=deprecated)
        return _ActionInfo(deprecated=deprecated, nargs_default=_init_default(res, chain, "nargs"))
    return _ActionInfo(known=False)


def _init_default(res: Resolver, chain: list[Any], param: str) -> Any:
    for c in chain:
        if not isinstance(c, ClassRef):
            continue
        init = res.class_attr(c, "__init__")
        if not isinstance(init, FuncRef):
            continue
        a = init.node.args
        pos = [*a.posonlyargs, *a.args]
        defaults = dict(zip([p.arg for p in pos[len(pos) - len(a.defaults):]], a.defaults, strict=True))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None})
        if param in defaults:
            return res.eval(defaults[param], Scope(init.module))
        return None
    return None


def _type_kind(res: Resolver, t: Any, present: bool) -> str:
    if not present or t is None:
        return "str"
    if isinstance(t, TypeMarker):
        return t.kind
    if isinstance(t, TypeWrapper):
        inner = _type_kind(res, t.inner, True)
        return "json" if "json" in t.wrapper.lower() else inner
    if isinstance(t, External):
        if t.qualname in ("builtins.int", "builtins.float", "builtins.str"):
            return t.short
        if t.qualname == "builtins.bool":
            return "str"
        if t.qualname in ("json.loads", "ujson.loads", "orjson.loads"):
            return "json"
        if t.short in ("Path", "PurePath"):
            return "str"
        return "unknown"
    if isinstance(t, ClassRef):
        return "str" if res.is_enum(t) else "unknown"
    if isinstance(t, FuncRef):
        if "json" in t.name.lower():
            return "json"
        if t.node.returns is not None:
            kinds = {a.kind for a in type_atoms(res, t.node.returns, Scope(t.module, t.owner))} - {"none"}
            if kinds == {"dict"} or kinds == {"dict", "str"}:
                return "json"
            if len(kinds) == 1 and next(iter(kinds)) in ("int", "float", "str"):
                return next(iter(kinds))
            if kinds == {"bool"}:
                return "str"
        for n in ast.walk(t.node):
            if isinstance(n, ast.Call) and dotted(n.func) in ("json.loads", "loads"):
                return "json"
    return "unknown"


def _text(v: Any) -> str:
    return re.sub(r"\s+", " ", v).strip() if isinstance(v, str) and v != "==SUPPRESS==" else ""


def _option(res: Resolver, raw: RawOption, flags: list[str], inverse: dict[str, str], dash_o: bool) -> dict[str, Any]:
    kw = raw.kwargs
    field_source = kw.get("__field_source__")
    dest = kw.get("dest")
    if not isinstance(dest, str):
        long = next((f for f in flags if f.startswith("--")), flags[0])
        dest = long.lstrip("-").replace("-", "_")
    info = _action_info(res, kw.get("action"))
    nargs = kw.get("nargs", info.nargs_default)
    choices_raw = kw.get("choices")
    choices = choice_strings(choices_raw) if choices_raw not in (None, UNRESOLVED) else None
    if info.no_value or nargs == 0:
        kind = "bool"
    elif nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1):
        kind = "list"
    elif choices is not None:
        kind = "choice"
    elif not info.known:
        kind = "unknown"
    else:
        kind = _type_kind(res, kw.get("type"), "type" in kw)
    help_text = _text(kw.get("help"))
    said = _deprecation_sentence(help_text)
    deprecated = info.deprecated or kw.get("deprecated") is True or bool(said)
    note = said or help_text or _text(kw.get("error_message"))
    if deprecated and not note and isinstance(kw.get("new_flag"), str):
        note = f"use {kw['new_flag']}"
    all_flags = list(dict.fromkeys(flags))
    if info.negatable and inverse:
        for f in flags:
            for prefix, inv in inverse.items():
                if f.startswith(prefix):
                    all_flags.append(inv + f[len(prefix):])
    if dash_o and "--optimization-level" in flags:
        all_flags.append("-O")
    source = field_source if raw.from_fields and isinstance(field_source, str) else raw.source
    return {
        "dest": dest,
        "flags": all_flags,
        "kind": kind,
        "choices": sorted(set(choices)) if choices is not None else None,
        "nargs": str(nargs) if nargs not in (None, 0) and kind != "bool" else None,
        "negatable": info.negatable,
        "deprecated": deprecated,
        "deprecated_note": note[:NOTE_MAX] if deprecated else "",
        "source": source,
    }


_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_SAYS_DEPRECATED = re.compile(r"^[\[(\s*]*deprecated\b|\b(?:is|are|has been|was|now) deprecated\b", re.IGNORECASE)


def _deprecation_sentence(text: str) -> str:
    """From a help text that says the option is deprecated ("Deprecated. Use ...", "This flag is deprecated"),
    the part from that sentence on; "" when it does not ("Replaces the deprecated --grpc-mode" does not)."""
    pos = 0
    for sentence in _SENTENCE.split(text):
        start = text.find(sentence, pos)
        pos = start + len(sentence)
        if _SAYS_DEPRECATED.search(sentence):
            return text[start:]
    return ""


def _sglang_spec_algorithms(res: Resolver, options: list[dict[str, Any]]) -> None:
    """SGLang 0.5.15+ checks `--speculative-algorithm` in `SpeculativeAlgorithm.from_string` (case-insensitive,
    plugins may register more), not in argparse; its builtin names are the enum's members and reserved aliases."""
    opt = next((o for o in options if o["dest"] == "speculative_algorithm" and o["choices"] is None), None)
    if opt is None:
        return
    module = "sglang.srt.speculative.spec_info"
    cls = res.lookup(module, "SpeculativeAlgorithm")
    if not isinstance(cls, ClassRef) or not res.is_enum(cls):
        return
    names = {m.name for m in res.enum_members(cls) if m.name != "NONE"}
    for where in (module, "sglang.srt.speculative.spec_registry"):  # NEXTN: resolved to EAGLE later
        aliases = res.eval(ast.Name("_RESERVED_ALIASES"), Scope(where))
        if isinstance(aliases, list | tuple):
            names |= {a for a in aliases if isinstance(a, str)}
            break
    opt["choices"] = sorted(names)
    opt["kind"] = "choice"
