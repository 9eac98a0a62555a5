"""Every message a release can print, as a `str.format` template with anonymous fields.

bringup recognises a server's state from its log lines; the templates say which wordings a release really has
(`Loading model from scratch` in vLLM 0.34, not `Starting to load model`). A message may be an f-string, a %-style
logging call, a concatenation or a `.format()`; all become one canonical form: each field `{}` or `{:SPEC}` (the
literal format spec, `%.2f` -> `{:.2f}`), literal braces doubled, so `text.format(*values)` renders the line.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tools.serverfacts.refs import Scope, dotted
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.wheel import module_name

MIN_LITERAL = 6
_LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal"}
_LOGGER_NAME = re.compile(r"(^|\.|_)(logger|log|lgr|logging|LOGGER|_logger)$", re.IGNORECASE)
_HELPER_NAME = re.compile(
    r"^(?:log|print)_\w+$|_(?:debug|info|warning|warn|error|critical)(?:_once|_on_rank0|_rank0)?$"
    r"|^(?:debug|info|warning|warn|error)_(?:once|on_rank0|rank0)$")
_PERCENT = re.compile(r"%(?:\((?P<key>[^)]*)\))?(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                      r"[hlL]?(?P<conv>[diouxXeEfFgGcrsa%])")
_FORMATTER = string.Formatter()
# texts a progress bar shows, set after it is made (`pbar.set_description(f"Capturing batches ({bs=} ...)")`)
_PROGRESS_TEXT = ("set_description", "set_description_str", "set_postfix_str")
# an exception class by its name: built where it is raised, or elsewhere and raised later (`return RuntimeError(...)`)
_EXCEPTION_NAME = re.compile(r"^[A-Z]\w*(Error|Exception|Exit|Interrupt)$")


@dataclass(frozen=True)
class LogFormat:
    text: str
    via: str
    source: str


def _escape(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def percent_to_format(s: str) -> str | None:
    """`"took %.2f s (%d%%)"` -> `"took {:.2f} s ({:d}%)"`; None if a conversion cannot be mapped."""
    out: list[str] = []
    pos = 0
    for m in _PERCENT.finditer(s):
        out.append(_escape(s[pos:m.start()]))
        pos = m.end()
        conv = m["conv"]
        if conv == "%":
            out.append("%")
            continue
        if m["width"] == "*" or m["prec"] == "*":
            return None
        flags, width, prec = m["flags"] or "", m["width"] or "", m["prec"]
        if conv in "sra":
            spec = (">" + width if "-" not in flags else "<" + width) if width else ""
            if prec is not None:
                spec += "." + prec
            out.append("{:" + spec + "}" if spec else "{}")
            continue
        if conv in "iu":
            conv = "d"
        if conv == "c":
            out.append("{}")
            continue
        spec = ""
        if "-" in flags:
            spec += "<"
        spec += "".join(f for f in "+ " if f in flags)
        if "#" in flags:
            spec += "#"
        if "0" in flags and "-" not in flags:
            spec += "0"
        spec += width
        if prec is not None:
            spec += "." + prec
        out.append("{:" + spec + conv + "}")
    out.append(_escape(s[pos:]))
    return "".join(out)


def _format_method_template(s: str) -> str | None:
    """A `"...".format(...)` receiver with named/numbered fields made anonymous (`{name:.2f}` -> `{:.2f}`)."""
    out: list[str] = []
    try:
        for literal, name, spec, _conv in _FORMATTER.parse(s):
            out.append(_escape(literal))
            if name is not None:
                out.append("{:" + spec + "}" if spec and "{" not in spec else "{}")
    except ValueError:
        return None
    return "".join(out)


class _Templater:
    def __init__(self, res: Resolver | None, module: str, local_strings: dict[str, list[ast.expr]],
                 local_dicts: dict[str, list[ast.expr]] | None = None) -> None:
        self.dicts = local_dicts or {}
        self.res = res
        self.module = module
        self.locals = local_strings

    def templates(self, node: ast.expr, percent: bool, depth: int = 0) -> list[str]:
        """The message templates an expression can produce (several when a variable has several literal values)."""
        if depth > 6:
            return []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if percent:
                t = percent_to_format(node.value)
                return [t] if t is not None else []
            return [_escape(node.value)]
        if isinstance(node, ast.JoinedStr):
            parts: list[str] = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(_escape(str(v.value)))
                    continue
                assert isinstance(v, ast.FormattedValue)
                spec = v.format_spec
                if isinstance(spec, ast.JoinedStr) and all(isinstance(x, ast.Constant) for x in spec.values):
                    lit = "".join(str(x.value) for x in spec.values if isinstance(x, ast.Constant))
                    parts.append("{:" + lit + "}" if lit else "{}")
                else:
                    parts.append("{}")
            t = "".join(parts)
            return [percent_to_format(_unescape_for_percent(t)) or t] if percent and "%" in t else [t]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            # no depth for a concatenation: a chain of `msg += ...` nests as deep as it is long
            lefts = self.templates(node.left, False, depth) or ["{}"]
            rights = self.templates(node.right, False, depth) or ["{}"]
            if not _has_literal(node):
                return []
            out = [a + b for a in lefts[:3] for b in rights[:3]]
            if percent:
                out = [percent_to_format(_unescape_for_percent(t)) or t for t in out]
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self._literal(node.left)
            if left is None:
                return []
            t = percent_to_format(left)
            return [t] if t is not None else []
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("substitute", "safe_substitute")):
            tmpl = self._template_literal(node.func.value)
            if tmpl is None:
                return []
            # each placeholder a field, and the text as each mapping the code can hand it renders it (vLLM's logo:
            # ANSI colours, or `dict.fromkeys(colors, "")`); a multi-line picture is printed line by line: each
            # line is its own template
            texts = [dollar_to_format(tmpl)]
            for mapping in self._mappings(node):
                texts.append(dollar_to_format(tmpl, mapping))
            lines = list(dict.fromkeys(ln for t in texts for ln in t.split("\n") if ln.strip()))
            return [percent_to_format(_unescape_for_percent(ln)) or ln if percent and "%" in ln else ln
                    for ln in lines]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
            left = self._literal(node.func.value)
            if left is None:
                return []
            t = _format_method_template(left)
            return [t] if t is not None else []
        if isinstance(node, ast.Name):
            out = []
            for expr in self.locals.get(node.id, []):
                out.extend(self.templates(expr, percent, depth + 1))
            if not out and self.res is not None:
                v = self.res.eval(node, Scope(self.module))
                if isinstance(v, str):
                    out.extend(self.templates(ast.Constant(v), percent, depth + 1))
            return out
        return []

    def _mappings(self, call: ast.Call) -> list[Callable[[str], str | None]]:
        """What `Template.substitute(m)` can be given, each as name -> text (None: unknown): a dict literal of
        strings, or `dict.fromkeys(..., "")`, assigned to `m` in the function."""
        arg = call.args[0] if call.args else None
        exprs = self.dicts.get(arg.id, []) if isinstance(arg, ast.Name) else [arg] if arg is not None else []
        out: list[Callable[[str], str | None]] = []
        for e in exprs:
            pairs = list(zip(e.keys, e.values, strict=True)) if isinstance(e, ast.Dict) else []
            if isinstance(e, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                                               and isinstance(v.value, str) for k, v in pairs):
                table = {str(k.value): str(v.value) for k, v in pairs
                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
                out.append(table.get)
            elif (isinstance(e, ast.Call) and dotted(e.func) == "dict.fromkeys" and len(e.args) == 2
                  and isinstance(e.args[1], ast.Constant) and isinstance(e.args[1].value, str)):
                out.append(_constant(e.args[1].value))
        return out

    def _template_literal(self, node: ast.expr, depth: int = 0) -> str | None:
        """The text of a `string.Template(...)` (written in place or held by a local name)."""
        if depth > 3:
            return None
        if isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] == "Template" and node.args:
            return self._literal(node.args[0])
        if isinstance(node, ast.Name) and len(self.locals.get(node.id, [])) == 1:
            return self._template_literal(self.locals[node.id][0], depth + 1)
        return None

    def _literal(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = self._literal(node.left), self._literal(node.right)
            return a + b if a is not None and b is not None else None
        if isinstance(node, ast.Name) and len(self.locals.get(node.id, [])) == 1:
            return self._literal(self.locals[node.id][0])
        return None


_DOLLAR = re.compile(r"\$(?:(\$)|\{([_a-zA-Z][_a-zA-Z0-9]*)\}|([_a-zA-Z][_a-zA-Z0-9]*))")


def dollar_to_format(s: str, mapping: Callable[[str], str | None] | None = None) -> str:
    """A `string.Template` text as a brace template: each `${name}`/`$name` a field `{}` (vLLM's logo fills them
    with ANSI colour codes, or with nothing), or the mapping's text for it where it has one; `$$` a `$`."""
    out: list[str] = []
    pos = 0
    for m in _DOLLAR.finditer(s):
        out.append(_escape(s[pos:m.start()]))
        got = mapping(m[2] or m[3]) if mapping is not None and not m[1] else None
        out.append("$" if m[1] else _escape(got) if got is not None else "{}")
        pos = m.end()
    out.append(_escape(s[pos:]))
    return "".join(out)


def _constant(value: str) -> Callable[[str], str | None]:
    def get(_name: str) -> str | None:
        return value
    return get


def _unescape_for_percent(t: str) -> str:
    """A brace template about to get %-conversion: its fields stay fields, so protect them from the escaping."""
    return t.replace("{{", "\x00").replace("}}", "\x01").replace("{", "\x02").replace("}", "\x03")


def _restore(t: str) -> str:
    return t.replace("\x00", "{{").replace("\x01", "}}").replace("\x02", "{").replace("\x03", "}")


def _has_literal(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip()
               for n in ast.walk(node)) or any(isinstance(n, ast.JoinedStr) for n in ast.walk(node))


def literal_length(text: str) -> int:
    try:
        return sum(len(lit.strip()) for lit, _n, _s, _c in _FORMATTER.parse(text))
    except ValueError:
        return 0


def _call_message(call: ast.Call) -> tuple[str, ast.expr, bool] | None:
    """(via, message expression, %-args present) for a logging-like call, else None."""
    func = call.func
    name = dotted(func)
    short = name.rsplit(".", 1)[-1] if name else ""
    if isinstance(func, ast.Attribute):
        recv = dotted(func.value)
        base = func.attr.removesuffix("_once")
        if recv and _LOGGER_NAME.search(recv) and (base in _LEVELS or func.attr == "log"):
            args = call.args[1:] if func.attr == "log" else call.args
            if args and not isinstance(args[0], ast.Starred):
                return f"logger.{func.attr}", args[0], len(args) > 1
            return None
        if name in ("warnings.warn",) and call.args:
            return name, call.args[0], False
    if name == "print" and call.args:
        return "print", call.args[0], False
    if isinstance(func, ast.Attribute) and call.args and (
            func.attr in _PROGRESS_TEXT or (func.attr == "write" and (dotted(func.value) or "").endswith("tqdm"))):
        return f"{'tqdm' if func.attr == 'write' else 'pbar'}.{func.attr}", call.args[0], False
    if short and _HELPER_NAME.search(short):
        for i, a in enumerate(call.args):
            if _stringish(a):
                return short, a, len(call.args) > i + 1 and "%" in _first_literal(a)
        return None
    return None


def _stringish(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _stringish(node.left) or _stringish(node.right)
    if isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] == "Template":
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
        (node.func.attr == "format" and _stringish(node.func.value))
        or node.func.attr in ("substitute", "safe_substitute"))


def _first_literal(node: ast.expr) -> str:
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            return n.value
    return ""


def _unconditional(scope: ast.AST) -> set[int]:
    """The statements of a function that run whenever it does (its body, and `with` blocks in it)."""
    out: set[int] = set()
    todo = list(getattr(scope, "body", []))
    while todo:
        st = todo.pop()
        out.add(id(st))
        if isinstance(st, ast.With | ast.AsyncWith):
            todo.extend(st.body)
    return out


_MAX_VARIANTS = 6


def _local_strings(nodes: list[ast.AST], scope: ast.AST | None = None) -> dict[str, list[ast.expr]]:
    """Names a function assigns string-like values to (`message = "vLLM server version %s, ..."`): every value
    that can reach a later use. `msg += "..."` extends each value; under a condition the values without the
    addition still reach (fewer additions first, at most a few variants)."""
    sure = _unconditional(scope) if scope is not None else set()
    out: dict[str, list[ast.expr]] = {}
    stmts = sorted((n for n in nodes if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)),
                   key=lambda n: (n.lineno, n.col_offset))
    for n in stmts:
        if isinstance(n, ast.AugAssign):
            if isinstance(n.target, ast.Name) and isinstance(n.op, ast.Add) and n.target.id in out:
                # `msg += f"..."`: what reaches a later use is each earlier value with the addition
                grown: list[ast.expr] = [ast.BinOp(old, ast.Add(), n.value) for old in out[n.target.id]]
                kept = grown if id(n) in sure else out[n.target.id] + grown
                out[n.target.id] = kept[:_MAX_VARIANTS]
            continue
        target = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else \
            n.target if isinstance(n, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and n.value is not None and _stringish(n.value):
            out.setdefault(target.id, []).append(n.value)
    return out


def _local_dicts(nodes: list[ast.AST]) -> dict[str, list[ast.expr]]:
    """Names a function assigns a dict literal or `dict.fromkeys(...)` to (a `Template.substitute` mapping)."""
    out: dict[str, list[ast.expr]] = {}
    for n in sorted((n for n in nodes if isinstance(n, ast.Assign)), key=lambda n: (n.lineno, n.col_offset)):
        if len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and (
                isinstance(n.value, ast.Dict) or (isinstance(n.value, ast.Call)
                                                   and dotted(n.value.func) == "dict.fromkeys")):
            out.setdefault(n.targets[0].id, []).append(n.value)
    return out


def _scopes(tree: ast.Module) -> list[tuple[ast.AST, list[ast.AST]]]:
    """(function or module, the nodes directly in it), in one pass: a message variable is looked up in the
    function that assigns it."""
    groups: dict[int, tuple[ast.AST, list[ast.AST]]] = {id(tree): (tree, [])}
    stack: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while stack:
        node, scope = stack.pop()
        groups[id(scope)][1].append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                groups[id(child)] = (child, [])
                stack.append((child, child))
            else:
                stack.append((child, scope))
    return list(groups.values())


def messages_of_module(tree: ast.Module, path: str, res: Resolver | None = None) -> Iterator[LogFormat]:
    module = module_name(path)
    for scope_node, nodes in _scopes(tree):
        t = _Templater(res, module, _local_strings(nodes, scope_node) if scope_node is not tree else {},
                       _local_dicts(nodes) if scope_node is not tree else {})
        raised = {id(n.exc): n.lineno for n in nodes if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)}
        for n in nodes:
            found: list[tuple[str, ast.expr, bool, int]] = []
            if isinstance(n, ast.Call):
                got = _call_message(n)
                if got is not None:
                    found.append((*got, n.lineno))
                for k in n.keywords:
                    if k.arg == "desc" and _stringish(k.value):
                        found.append(("desc", k.value, False, k.value.lineno))
                cls = (dotted(n.func) or "").rsplit(".", 1)[-1]
                if n.args and not isinstance(n.args[0], ast.Starred) and (
                        id(n) in raised or (_EXCEPTION_NAME.match(cls) and got is None)):
                    found.append((f"raise {cls}", n.args[0], False, raised.get(id(n), n.lineno)))
            for via, expr, percent, line in found:
                for text in t.templates(expr, percent):
                    text = _restore(text)
                    if literal_length(text) >= MIN_LITERAL and _renders(text):
                        yield LogFormat(text, via, f"{path}:{line}")


def _renders(text: str) -> bool:
    try:
        list(_FORMATTER.parse(text))
    except ValueError:
        return False
    return True


def extract_log_formats(res: Resolver, paths: list[str]) -> list[LogFormat]:
    """Every message of these files, each text once (from its first place in the wheel)."""
    seen: dict[str, tuple[tuple[str, int], LogFormat]] = {}
    for path in sorted(paths):
        tree = res.pkg.tree_of(path)
        if tree is None:
            continue
        for f in messages_of_module(tree, path, res):
            where = (path, int(f.source.rsplit(":", 1)[1]))
            if f.text not in seen or where < seen[f.text][0]:
                seen[f.text] = (where, f)
    return sorted((f for _w, f in seen.values()), key=lambda f: f.text)
