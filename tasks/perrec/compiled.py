"""Prompt templates compiled to plain Python: the fast path of the prompts written for every example, made from the
template file itself, so the template is the one source of each prompt's text.

The template is parsed by the Jinja environment that renders it (so trim_blocks, lstrip_blocks and the dropped final
newline are Jinja's own) and its syntax tree is written out as one Python function of the template's variables. The
part of Jinja compiled is what prompt templates use: text, printed names, attributes and constant subscripts,
constants, `|length`, `|count`, `"%..."|format(...)`, `|join("...")`, `if`/`elif`/`else`, `for` over one sequence
(`loop.first`, `loop.last`, `loop.index`, `loop.index0`, `loop.length`), `not`, `and`, `or`, comparisons and
`a if b else c`. A template using anything else (another filter, a test, `set`, a macro, an include) is not compiled:
`compiled` gives None and the caller renders with Jinja.

An attribute `x.name` is read as the item `x["name"]`, as Jinja reads it from a dict (names a dict itself has, and
names starting with '_', are refused at compile time). A value the function cannot read that way (a missing
variable, an object without items) raises, and the written function then renders with Jinja, which gives its text or
its error: a compiled template never writes a text Jinja would not.
"""
from __future__ import annotations

import functools
import keyword
import re
from typing import Any, Callable, Optional

from jinja2 import nodes

from recbench.api.prompts import get_template, sandbox, template_path

#: filters compiled, with the Python expression written for each (its value, then its arguments)
_FILTERS: dict[str, Callable[[str, list[str]], str]] = {
    "length": lambda v, a: f"len({v})" if not a else _refuse("length with arguments"),
    "count": lambda v, a: f"len({v})" if not a else _refuse("count with arguments"),
    "format": lambda v, a: f"({_text(v)} % ({''.join(x + ', ' for x in a)}))",
    "join": lambda v, a: (f"str({a[0] if a else repr('')}).join(map(str, {v}))" if len(a) <= 1
                          else _refuse("join with an attribute")),
}
_LOOP_FIELDS = {"first": "({i} == 0)", "last": "({i} == {n} - 1)", "index": "({i} + 1)", "index0": "{i}",
                "length": "{n}"}
#: a format of one number as a float ("%.2f", "%g"): numbers that compare equal print alike, but for the sign of zero
_FLOAT_SPEC = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[eEfFgG]")
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "lteq": "<=", "gteq": ">="}


_NO = object()  # a variable the written function was not given


class Unsupported(Exception):
    """A template construct the compiler does not write (the template is rendered by Jinja instead)."""


def _text(v: str) -> str:
    """str(v) as written for expression `v` (a string constant as it is)."""
    return v if v.startswith(("'", '"')) else f"str({v})"


def _refuse(what: str) -> str:
    raise Unsupported(what)


class _Writer:
    """Python source of one template function, statement by statement."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.variables: dict[str, str] = {}  # template variable -> the local it is read into
        self.scopes: list[dict[str, str]] = []  # loop targets in scope, innermost last
        self.loops: list[dict[str, Any]] = []  # enclosing loops: index and length locals, which of them are used
        self.count = 0
        self.memos: list[str] = []  # the memo dict of each format site

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"_{stem}{self.count}"

    def body(self, body: list[nodes.Node], depth: int) -> None:
        pad = "    " * depth
        start = len(self.lines)
        for node in body:
            if isinstance(node, nodes.Output):
                self.output(node, pad)
            elif isinstance(node, nodes.If):
                self.branch(node, depth)
            elif isinstance(node, nodes.For):
                self.loop(node, depth)
            else:
                raise Unsupported(type(node).__name__)
        if len(self.lines) == start:
            self.lines.append(pad + "pass")

    def pieces(self, parts: list[nodes.Node]) -> tuple[str, list[str]]:
        """A %-format of the printed parts and the expressions of its arguments."""
        fmt, args = [], []
        for part in parts:
            if isinstance(part, nodes.TemplateData):
                fmt.append(part.data.replace("%", "%%"))
            else:
                fmt.append("%s")
                args.append(self.expr(part))
        return "".join(fmt), args

    def output(self, node: nodes.Output, pad: str) -> None:
        text, args = self.pieces(node.nodes)
        self.lines.append(f"{pad}_t += {text.replace('%%', '%')!r}" if not args
                          else f"{pad}_t += {text!r} % ({''.join(a + ', ' for a in args)})")

    def branch(self, node: nodes.If, depth: int) -> None:
        pad = "    " * depth
        self.lines.append(f"{pad}if {self.expr(node.test)}:")
        self.body(node.body, depth + 1)
        for alt in node.elif_:
            self.lines.append(f"{pad}elif {self.expr(alt.test)}:")
            self.body(alt.body, depth + 1)
        if node.else_:
            self.lines.append(f"{pad}else:")
            self.body(node.else_, depth + 1)

    def loop(self, node: nodes.For, depth: int) -> None:
        if node.recursive or node.test is not None or node.else_ or not isinstance(node.target, nodes.Name):
            raise Unsupported("a for loop other than `for x in seq`")
        pad = "    " * depth
        seq, item = self.expr(node.iter), self.fresh("v")
        sep = _separator(node.body)
        if sep is not None:  # `{{ x }}{{ ", " if not loop.last }}`: the items joined by the separator
            self.scopes.append({node.target.name: item})
            try:
                text, args = self.pieces(node.body[0].nodes[:-1])
            finally:
                self.scopes.pop()
            self.lines.append(f"{pad}_t += {sep!r}.join([{text!r} % ({''.join(a + ', ' for a in args)}) "
                              f"for {item} in {seq}])")
            return
        info = {"i": self.fresh("i"), "n": self.fresh("n"), "s": self.fresh("s"), "i_used": False, "n_used": False}
        head = len(self.lines)
        self.loops.append(info)
        self.scopes.append({node.target.name: item})
        try:
            self.body(node.body, depth + 1)
        finally:
            self.scopes.pop()
            self.loops.pop()
        header = []
        if info["n_used"]:
            header, seq = [f"{pad}{info['s']} = {seq}", f"{pad}{info['n']} = len({info['s']})"], info["s"]
        clause = f"for {info['i']}, {item} in enumerate({seq})" if info["i_used"] else f"for {item} in {seq}"
        one = self.lines[head:]
        if len(one) == 1 and one[0].startswith(f"{pad}    _t += "):  # one output per item: joined at once
            self.lines[head:] = [*header, f"{pad}_t += ''.join([{one[0][len(pad) + 10:]} {clause}])"]
        else:
            self.lines[head:head] = [*header, f"{pad}{clause}:"]

    def expr(self, node: nodes.Node) -> str:
        if isinstance(node, nodes.Const):
            if node.value is not None and type(node.value) not in (str, int, float, bool):
                raise Unsupported(f"a constant of type {type(node.value).__name__}")
            return repr(node.value)
        if isinstance(node, nodes.Name):
            return self.name(node.name)
        if isinstance(node, nodes.Getattr):
            if isinstance(node.node, nodes.Name) and node.node.name == "loop" and self.loops \
                    and not any("loop" in s for s in self.scopes):
                return self.loop_field(node.attr)
            if node.attr.startswith("_") or hasattr(dict, node.attr):
                raise Unsupported(f"attribute '{node.attr}' (a name dicts have)")
            return f"{self.expr(node.node)}[{node.attr!r}]"
        if isinstance(node, nodes.Getitem):
            if not isinstance(node.arg, nodes.Const) or type(node.arg.value) not in (str, int):
                raise Unsupported("a subscript other than a constant")
            return f"{self.expr(node.node)}[{node.arg.value!r}]"
        if isinstance(node, nodes.Filter):
            return self.filtered(node)
        if isinstance(node, nodes.Not):
            return f"(not {self.expr(node.node)})"
        if isinstance(node, (nodes.And, nodes.Or)):
            op = "and" if isinstance(node, nodes.And) else "or"
            return f"({self.expr(node.left)} {op} {self.expr(node.right)})"
        if isinstance(node, nodes.CondExpr):  # no else: Jinja's undefined, which prints as ""
            other = self.expr(node.expr2) if node.expr2 is not None else "''"
            return f"({self.expr(node.expr1)} if {self.expr(node.test)} else {other})"
        if isinstance(node, nodes.Compare) and len(node.ops) == 1 and node.ops[0].op in _COMPARE:
            return f"({self.expr(node.expr)} {_COMPARE[node.ops[0].op]} {self.expr(node.ops[0].expr)})"
        raise Unsupported(type(node).__name__)

    def name(self, name: str) -> str:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name == "loop":
            raise Unsupported("`loop` other than its fields")
        self.variables.setdefault(name, name)  # an argument of the written function
        return name

    def loop_field(self, attr: str) -> str:
        if attr not in _LOOP_FIELDS:
            raise Unsupported(f"loop.{attr}")
        info = self.loops[-1]
        info["i_used"] = info["i_used"] or "{i}" in _LOOP_FIELDS[attr]
        info["n_used"] = info["n_used"] or "{n}" in _LOOP_FIELDS[attr]
        if info["n_used"]:
            info["i_used"] = True
        return _LOOP_FIELDS[attr].format(i=info["i"], n=info["n"])

    def filtered(self, node: nodes.Filter) -> str:
        if node.node is None or node.kwargs or node.dyn_args or node.dyn_kwargs or node.name not in _FILTERS:
            raise Unsupported(f"filter '{node.name}'")
        value, args = self.expr(node.node), [self.expr(a) for a in node.args]
        if node.name == "format" and len(args) == 1 and isinstance(node.node, nodes.Const):  # a float's text, kept
            memo, x = self.fresh("m"), self.fresh("x")
            self.memos.append(memo)
            if _FLOAT_SPEC.fullmatch(str(node.node.value)):  # equal numbers print alike (4, 4.0, True): no type test
                return f"({memo}.get({x} := {args[0]}) or _formatted({memo}, {value}, {x}))"
            return (f"(({memo}.get({x}) if type({x} := {args[0]}) is float else None) "
                    f"or _formatted({memo}, {value}, {x}))")
        return _FILTERS[node.name](value, args)


#: what the written functions may call
_BUILTINS = {"len": len, "str": str, "map": map, "enumerate": enumerate, "type": type, "float": float,
             "Exception": Exception, "LookupError": LookupError}
_MEMO_MAX = 4096  # formatted floats kept per format site


def _formatted(memo: dict, fmt: str, x: Any) -> str:
    """fmt % (x,), kept in `memo` for a later float of that value (not zero: -0.0 == 0.0 but prints otherwise)."""
    text = fmt % (x,)
    if type(x) is float and x and len(memo) < _MEMO_MAX:
        memo[x] = text
    return text


def _separator(body: list[nodes.Node]) -> Optional[str]:
    """The separator of a loop body that is one output ending in `{{ "sep" if not loop.last }}` with no other use of
    `loop`, else None."""
    if len(body) != 1 or not isinstance(body[0], nodes.Output) or not body[0].nodes:
        return None
    *rest, last = body[0].nodes
    if not (isinstance(last, nodes.CondExpr) and last.expr2 is None and isinstance(last.expr1, nodes.Const)
            and type(last.expr1.value) is str and isinstance(last.test, nodes.Not)
            and isinstance(last.test.node, nodes.Getattr) and last.test.node.attr == "last"
            and isinstance(last.test.node.node, nodes.Name) and last.test.node.node.name == "loop"):
        return None
    if any(n.name == "loop" for part in rest for n in part.find_all(nodes.Name)) or \
            any(isinstance(part, nodes.Name) and part.name == "loop" for part in rest):
        return None
    return last.expr1.value


def source_of(tree: nodes.Template, name: str = "template", strip: bool = False) -> tuple[str, list[str]]:
    """The Python source of the function writing a parsed template (`render`, the template's variables as keyword
    arguments), and the memo dicts it reads (one per format site)."""
    w = _Writer()
    w.body(tree.body, 2)
    bad = [v for v in w.variables if v.startswith("_") or keyword.iskeyword(v) or v in _BUILTINS]
    if bad:
        raise Unsupported(f"variable name {bad[0]!r}")
    params = "".join(f"{v}=_NO, " for v in w.variables)
    given = ", ".join(f"{v}={v}" for v in w.variables)
    unset = " or ".join(f"{v} is _NO" for v in w.variables) or "False"
    return "\n".join([f"def render({params}**_rest):  # {name}", "    try:", f"        if {unset}:",
                      "            raise LookupError('a variable is missing')", "        _t = ''", *w.lines,
                      f"        return _t{'.strip()' if strip else ''}",
                      "    except Exception:  # what Jinja makes of these variables: its text or its error",
                      f"        return _jinja(_rest, {given})"]) + "\n", w.memos


def _written(package: str, name: str, tree: nodes.Template, strip: bool) -> Callable[..., str]:
    """The function written for a parsed template, with its `source` and `template` name as attributes."""
    def jinja(rest: dict[str, Any], **given: Any) -> str:  # Jinja's render of what the written function was given
        text = get_template(package, name).render(**rest, **{k: v for k, v in given.items() if v is not _NO})
        return text.strip() if strip else text

    source, memos = source_of(tree, name, strip)
    scope: dict[str, Any] = {"__builtins__": _BUILTINS, "_NO": _NO, "_jinja": jinja, "_formatted": _formatted,
                             **{m: {} for m in memos}}
    try:
        exec(compile(source, f"<compiled template {name}>", "exec"), scope)  # noqa: S102 - the source written above
    except SyntaxError as e:
        raise Unsupported(str(e)) from None
    fn = scope["render"]
    fn.source, fn.template = source, name
    return fn


@functools.lru_cache(maxsize=64)
def compiled(package: str, name: str, strip: bool = True) -> Optional[Callable[..., str]]:
    """Template `name` of `package` (as api/prompts finds it: a path, else the package's templates/) as a Python
    function of its variables (keyword arguments) giving Jinja's text (`strip`: stripped, as api/prompts.render
    gives it), written once like api/prompts.get_template loads once; None when the template uses something the
    compiler does not write."""
    p = template_path(package, name)
    if not p.is_file():
        return None
    env = sandbox(str(p.parent))
    try:
        return _written(package, name, env.parse(p.read_text(encoding="utf-8")), strip)
    except Unsupported:
        return None
