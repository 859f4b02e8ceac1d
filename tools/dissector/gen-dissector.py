#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate omsd.lua, a Wireshark Lua dissector, from common/wire.h (docs/tools.md, Wireshark).

Everything the dissector knows comes from the schema header, so it cannot drift from the code:

  - the #define constants (WIRE_MAGIC, WIRE_VERSION_MAJOR, WIRE_VERSION_MINOR,
    WIRE_MSG_EXT_MAX, WIRE_FRAME_F_MAC, WIRE_MAC_SIZE, array bounds such as
    WIRE_OPEN_ORDERS_MAX);
  - the X-macro lists: WIRE_TYPES(X) (name, value, struct, has_tail) and WIRE_REASONS(X);
  - every `enum wire_*` (value names for fields: a field uses the enum its comment names,
    `/* enum wire_side */`, or else the enum `wire_<field name>` when there is one);
  - every `struct wire_*` body: fixed-width integers (u)int8/16/32/64_t, arrays of them or
    of structs, nested structs. The layout is computed with natural alignment (wire.h has no
    #pragma pack) and checked against every `static_assert(sizeof(struct X) == N)` and
    `static_assert(offsetof(struct X, f) == N)` in the header: a disagreement, a struct a
    message type names that has no size assertion, or a construct the parser does not know
    (a union, a bit-field, a pointer, an unknown type) fails generation with exit status 1
    and a message naming the struct, rather than emitting a wrong dissector.

What comes from the codec (common/wire.c, docs/wire.md) rather than from declarations: a UDP
datagram is one frame, `wire_frame_hdr | msg | msg | ... | [MAC, when WIRE_FRAME_F_MAC]`;
each message starts with `struct wire_msg_hdr` (type, length); a message type with has_tail
carries `tail_len` bytes after its struct, zero-padded to a multiple of 8; a fixed-size
message may be longer than its struct by fields a newer minor appended (in 8-byte steps, at
most WIRE_MSG_EXT_MAX), shown as bytes (docs/wire.md, "Versions").

Usage: gen-dissector.py WIRE_H OUT_LUA [--port N]
       gen-dissector.py --check          (self-test of the parser on built-in snippets)
"""

import argparse
import re
import sys

INT_TYPES = {  # C type -> (size, signed)
    "uint8_t": (1, False), "uint16_t": (2, False), "uint32_t": (4, False),
    "uint64_t": (8, False), "int8_t": (1, True), "int16_t": (2, True),
    "int32_t": (4, True), "int64_t": (8, True),
}
MSG_HDR = "wire_msg_hdr"
FRAME_HDR = "wire_frame_hdr"
DEFAULT_PORT = 7400  # [node] udp_port default (docs/dataplane.md, deploy/omsd.ini)


class GenError(Exception):
    pass


# ------------------------------------------------------------------------------------------
# Parsing.
# ------------------------------------------------------------------------------------------

def strip_comments(text):
    """Remove /* */ and // comments, keeping newlines so line structure survives."""
    def repl(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*", repl, text, flags=re.S)


def join_continuations(text):
    return re.sub(r"\\\n", " ", text)


def eval_expr(expr, consts, sizes=None, where="expression"):
    """Evaluate an integer constant expression: literals, #define names, sizeof(struct X),
    UINT64_C(n), + - * / % << >> | & ~ and parentheses. Anything else is an error."""
    e = expr
    e = re.sub(r"U?INT(?:8|16|32|64)_C\(([^()]*)\)", r"(\1)", e)
    if sizes is not None:
        def sz(m):
            name = m.group(1)
            if name not in sizes:
                raise GenError(f"{where}: sizeof(struct {name}) of an unknown struct")
            return str(sizes[name])
        e = re.sub(r"sizeof\s*\(\s*struct\s+(\w+)\s*\)", sz, e)
    for _ in range(16):  # constants defined in terms of other constants
        new = re.sub(r"\b[A-Za-z_]\w*\b",
                     lambda m: f"({consts[m.group(0)]})" if m.group(0) in consts else m.group(0), e)
        if new == e:
            break
        e = new
    e = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", e)
    if not re.fullmatch(r"[\s0-9a-fA-FxX()+\-*/%<>|&~]*", e) or re.search(r"[g-wyzG-WYZ]", e):
        raise GenError(f"{where}: cannot evaluate '{expr.strip()}'")
    try:
        return int(eval(e.replace("/", "//"), {"__builtins__": {}}, {}))  # noqa: S307 (checked above)
    except Exception as exc:  # pragma: no cover - malformed expression
        raise GenError(f"{where}: cannot evaluate '{expr.strip()}': {exc}") from exc


def parse_defines(text):
    """Object-like #define NAME value with an integer value (others are skipped)."""
    consts = {}
    raw = {}
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]*)$",
                         join_continuations(strip_comments(text)), re.M):
        raw[m.group(1)] = m.group(2).strip()
    for name, val in raw.items():
        try:
            consts[name] = eval_expr(val, {k: v for k, v in raw.items() if k != name})
        except GenError:
            pass
    return consts


def parse_xlist(text, name):
    """The invocations X(a, b, ...) of an X-macro list `#define NAME(X) X(...) X(...)`."""
    t = join_continuations(strip_comments(text))
    m = re.search(r"#[ \t]*define[ \t]+" + name + r"\(X\)([^\n]*)", t)
    if m is None:
        raise GenError(f"X-macro list {name}(X) not found")
    rows = [[a.strip() for a in x.split(",")] for x in re.findall(r"\bX\(([^()]*)\)", m.group(1))]
    if not rows:
        raise GenError(f"X-macro list {name}(X) is empty")
    return rows


def common_prefix(names):
    if len(names) < 2:
        return "WIRE_"
    p = names[0]
    for n in names[1:]:
        while not n.startswith(p):
            p = p[:-1]
    p = p[: p.rfind("_") + 1]
    return p if p else "WIRE_"


def parse_enums(text, consts, xlists):
    """enum wire_x { A = 1, B, ... } -> {"wire_x": [(value, short_name), ...]}. An enum built
    from an X-macro list (WIRE_REASONS) takes that list's (name, value) columns. Sentinel
    entries (*_MAX, *_COUNT, *_LIMIT) are left out of the value names."""
    enums = {}
    t = strip_comments(text)
    for m in re.finditer(r"\benum\s+(\w+)\s*\{(.*?)\}\s*;", t, re.S):
        name, body = m.group(1), m.group(2)
        used = [lst for lst in xlists if re.search(r"\b" + lst + r"\s*\(", body)]
        if used:
            entries = [(eval_expr(r[1], consts, where=f"enum {name}"), r[0])
                       for r in xlists[used[0]]]
        else:
            entries = []
            nxt = 0
            body = "\n".join(ln for ln in body.split("\n") if not ln.strip().startswith("#"))
            if re.search(r"\w\s*\(", body):
                continue  # built from a list this generator does not read (WIRE_ERRS)
            for item in body.split(","):
                item = item.strip()
                if not item:
                    continue
                if "=" in item:
                    n, v = item.split("=", 1)
                    val = eval_expr(v, {**consts, **{e: x for x, e in entries}},
                                    where=f"enum {name}")
                else:
                    n, val = item, nxt
                entries.append((val, n.strip()))
                nxt = val + 1
            prefix = common_prefix([n for _, n in entries])
            entries = [(v, n[len(prefix):] if n.startswith(prefix) and len(n) > len(prefix)
                        else n) for v, n in entries]
        # A trailing sentinel (WIRE_CAUSE_MAX, WIRE_TYPE_LIMIT, X(MAX, 32)) names no value.
        top = max(v for v, _ in entries) if entries else 0
        enums[name] = [(v, n) for v, n in entries
                       if not (len(entries) > 1 and v == top and
                               re.search(r"(^|_)(MAX|COUNT|LIMIT)$", n))]
    return enums


class Field:
    def __init__(self, name, ctype, dims, comment):
        self.name = name          # C member name
        self.ctype = ctype        # "uint64_t" or "struct wire_oid"
        self.dims = dims          # array dimensions (evaluated)
        self.comment = comment    # the trailing comment, for the enum it names
        self.offset = 0
        self.elem_size = 0
        self.size = 0

    @property
    def struct(self):
        return self.ctype[len("struct "):] if self.ctype.startswith("struct ") else None

    @property
    def count(self):
        n = 1
        for d in self.dims:
            n *= d
        return n


class Struct:
    def __init__(self, name, fields):
        self.name = name
        self.fields = fields
        self.size = 0
        self.align = 1


def parse_structs(text, consts):
    """struct wire_x { members }; -> ({name: Struct}, {name: error}), members with their
    trailing comments. A struct the parser cannot read is an error only when a message, a
    header or a static_assert needs it (wire.h also declares codec structs with pointers)."""
    structs = {}
    bad = {}
    for m in re.finditer(r"\bstruct\s+(\w+)\s*\{([^{}]*)\}\s*;", text, re.S):
        name, body = m.group(1), m.group(2)
        try:
            structs[name] = parse_struct_body(name, body, consts)
        except GenError as e:
            bad[name] = e
    return structs, bad


def parse_struct_body(name, body, consts):
    if True:
        fields = []
        toks = list(re.finditer(r"/\*.*?\*/|//[^\n]*|[^;/]+;", body, re.S))
        for i, tok in enumerate(toks):
            s = tok.group(0)
            if s.startswith("/"):
                continue
            comment = ""
            if i + 1 < len(toks) and toks[i + 1].group(0).startswith("/") and \
                    "\n" not in body[tok.end():toks[i + 1].start()]:
                comment = toks[i + 1].group(0)
            decl = " ".join(s[:-1].split())
            if re.search(r"\b(union|enum)\b|[*:]|\(", decl):
                raise GenError(f"struct {name}: unsupported member '{decl}'")
            dm = re.fullmatch(r"(?:const\s+)?(struct\s+\w+|\w+)\s+(\w+)\s*((?:\[[^\]]+\]\s*)*)",
                              decl)
            if dm is None:
                raise GenError(f"struct {name}: cannot parse member '{decl}'")
            ctype, fname, dimtxt = dm.group(1), dm.group(2), dm.group(3)
            if not ctype.startswith("struct ") and ctype not in INT_TYPES:
                raise GenError(f"struct {name}: member '{fname}' has unsupported type '{ctype}'")
            dims = [eval_expr(d, consts, where=f"struct {name}.{fname}")
                    for d in re.findall(r"\[([^\]]+)\]", dimtxt)]
            fields.append(Field(fname, ctype, dims, comment))
        if not fields:
            raise GenError(f"struct {name}: no members")
        return Struct(name, fields)


def layout(structs, bad):
    """Natural-alignment layout of every struct (members in order, each at a multiple of its
    alignment, the struct padded to its largest alignment), as the C compiler does for wire.h."""
    done = {}

    def lay(name, stack):
        if name in done:
            return done[name]
        if name in stack:
            raise GenError(f"struct {name}: contains itself")
        if name in bad:
            raise GenError(f"{bad[name]}" + (f" (member of struct {stack[-1]})" if stack else ""))
        if name not in structs:
            raise GenError(f"struct {stack[-1] if stack else '?'}: member of unknown "
                           f"struct {name}")
        st = structs[name]
        off = 0
        align = 1
        for f in st.fields:
            if f.struct:
                inner = lay(f.struct, stack + [name])
                esize, ealign = inner.size, inner.align
            else:
                esize = ealign = INT_TYPES[f.ctype][0]
            aligned = (off + ealign - 1) // ealign * ealign
            if aligned != off:
                # The layout is still right (the compiler pads the same way), but STYLE.md
                # wants padding written out as reserved fields: say so, show no field there.
                print(f"gen-dissector: warning: struct {name}: {aligned - off} padding "
                      f"byte(s) before {f.name} (not a reserved field)", file=sys.stderr)
            off = aligned
            f.offset, f.elem_size, f.size = off, esize, esize * f.count
            off += f.size
            align = max(align, ealign)
        st.size = (off + align - 1) // align * align
        if st.size != off:
            print(f"gen-dissector: warning: struct {name}: {st.size - off} padding byte(s) "
                  f"at the end (not a reserved field)", file=sys.stderr)
        st.align = align
        done[name] = st
        return st

    for n in list(structs):
        try:
            lay(n, [])
        except GenError as e:
            bad[n] = e
    for n in bad:
        structs.pop(n, None)


def check_asserts(text, structs, bad, consts):
    """Verify every static_assert on a struct's size or a member's offset (outside macro
    definitions) against the computed layout. Returns the set of structs whose size was
    asserted."""
    t = strip_comments(text)
    t = re.sub(r"^[ \t]*#[ \t]*define[^\n]*(?:\\\n[^\n]*)*", "", t, flags=re.M)
    sizes = {n: s.size for n, s in structs.items()}
    asserted = set()
    for m in re.finditer(r"\bstatic_assert\s*\((.*?),\s*\"[^\"]*\"\s*\)\s*;", t, re.S):
        cond = " ".join(m.group(1).split())
        sm = re.fullmatch(r"sizeof\s*\(\s*struct\s+(\w+)\s*\)\s*==\s*(.+)", cond)
        om = re.fullmatch(r"offsetof\s*\(\s*struct\s+(\w+)\s*,\s*(\w+)\s*\)\s*==\s*(.+)", cond)
        if sm:
            name = sm.group(1)
            if name in bad:
                raise bad[name]
            if name not in structs:
                raise GenError(f"static_assert names struct {name}, which was not parsed")
            want = eval_expr(sm.group(2), consts, sizes, where=f"static_assert on {name}")
            if structs[name].size != want:
                raise GenError(f"struct {name}: computed size {structs[name].size}, "
                               f"static_assert says {want}")
            asserted.add(name)
        elif om:
            name, fname = om.group(1), om.group(2)
            fl = [f for f in structs.get(name, Struct(name, [])).fields if f.name == fname]
            if not fl:
                raise GenError(f"static_assert: offsetof(struct {name}, {fname}) unknown")
            want = eval_expr(om.group(3), consts, sizes, where=f"static_assert on {name}")
            if fl[0].offset != want:
                raise GenError(f"struct {name}: computed offset of {fname} {fl[0].offset}, "
                               f"static_assert says {want}")
    return asserted


class Schema:
    pass


def parse_schema(text):
    s = Schema()
    s.consts = parse_defines(text)
    for need in ("WIRE_MAGIC", "WIRE_VERSION_MAJOR", "WIRE_VERSION_MINOR", "WIRE_FRAME_F_MAC",
                 "WIRE_MAC_SIZE"):
        if need not in s.consts:
            raise GenError(f"#define {need} not found")
    s.types = []
    for row in parse_xlist(text, "WIRE_TYPES"):
        if len(row) < 4:
            raise GenError(f"WIRE_TYPES row {row}: want (name, value, struct, has_tail, ...)")
        s.types.append((row[0], eval_expr(row[1], s.consts, where=f"WIRE_TYPES {row[0]}"),
                        row[2], eval_expr(row[3], s.consts, where=f"WIRE_TYPES {row[0]}") != 0))
    xlists = {"WIRE_TYPES": [[r[0], str(r[1])] for r in s.types],
              "WIRE_REASONS": parse_xlist(text, "WIRE_REASONS")}
    s.enums = parse_enums(text, s.consts, xlists)
    if "wire_reason" not in s.enums:
        raise GenError("enum wire_reason (from WIRE_REASONS) not found")
    s.structs, bad = parse_structs(text, s.consts)
    layout(s.structs, bad)
    for n in [FRAME_HDR, MSG_HDR] + [t[2] for t in s.types] + ["wire_entry_hdr"]:
        if n in bad:
            raise bad[n]
    for n in (FRAME_HDR, MSG_HDR):
        if n not in s.structs:
            raise GenError(f"struct {n} not found")
    asserted = check_asserts(text, s.structs, bad, s.consts)
    for n in (FRAME_HDR, MSG_HDR):
        if n not in asserted:
            raise GenError(f"struct {n}: no static_assert on its size")
    for f in ("type", "length"):
        if f not in [x.name for x in s.structs[MSG_HDR].fields]:
            raise GenError(f"struct {MSG_HDR}: no member '{f}'")
    for f in ("magic", "version_major", "version_minor", "flags", "msg_count", "length"):
        if f not in [x.name for x in s.structs[FRAME_HDR].fields]:
            raise GenError(f"struct {FRAME_HDR}: no member '{f}'")
    seen = {}
    for name, value, st, tail in s.types:
        if st not in s.structs:
            raise GenError(f"WIRE_TYPES {name}: struct {st} not found")
        if st not in asserted:
            raise GenError(f"struct {st} ({name}): no static_assert on its size")
        first = s.structs[st].fields[0]
        if first.struct != MSG_HDR or first.dims:
            raise GenError(f"struct {st} ({name}): first member is not a struct {MSG_HDR}")
        if tail and "tail_len" not in [f.name for f in s.structs[st].fields]:
            raise GenError(f"struct {st} ({name}): has_tail but no tail_len member")
        if value in seen:
            raise GenError(f"WIRE_TYPES {name}: value {value} also used by {seen[value]}")
        seen[value] = name
    return s


# ------------------------------------------------------------------------------------------
# Lua emission.
# ------------------------------------------------------------------------------------------

def fill(template, **values):
    """Replace @name@ placeholders (Lua is full of braces, so no str.format)."""
    def sub(m):
        if m.group(1) not in values:
            raise GenError(f"template placeholder @{m.group(1)}@ has no value")
        return str(values[m.group(1)])
    return re.sub(r"@(\w+)@", sub, template)


def lua_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def is_hex(name):
    return bool(re.search(r"flags|reserved|magic|mac|key", name))


def enum_for(schema, f):
    m = re.search(r"\benum\s+(wire_\w+)", f.comment)
    if m and m.group(1) in schema.enums:
        return m.group(1)
    if ("wire_" + f.name) in schema.enums:
        return "wire_" + f.name
    return None


def count_field(st, f):
    """The member that says how many elements of array f are used: <singular>_count,
    <name>_count, or `count` when f is the struct's only struct array."""
    names = [x.name for x in st.fields]
    for cand in (f.name.rstrip("s") + "_count", f.name + "_count"):
        if cand in names:
            return cand
    arrays = [x for x in st.fields if x.dims and x.struct]
    if "count" in names and arrays == [f]:
        return "count"
    return None


class Emitter:
    def __init__(self, schema):
        self.s = schema
        self.fields = {}   # abbrev -> (var, lua constructor)
        self.order = []

    def pf(self, abbrev, ctor):
        """Register a ProtoField once per abbreviation; a second member with the same
        abbreviation but another type gets a qualified one."""
        if abbrev in self.fields:
            if self.fields[abbrev][1] == ctor(abbrev):
                return self.fields[abbrev][0]
            return None
        var = "F[%d]" % (len(self.order) + 1)
        self.fields[abbrev] = (var, ctor(abbrev))
        self.order.append(abbrev)
        return var

    def leaf(self, path, f, sname):
        """ProtoField for an integer member (or a byte array)."""
        label = path
        if f.ctype == "uint8_t" and f.dims:
            def ctor(a):
                return f"ProtoField.bytes({lua_str(a)}, {lua_str(label)})"
        else:
            size, signed = INT_TYPES[f.ctype]
            kind = ("int" if signed else "uint") + str(size * 8)
            en = enum_for(self.s, f)
            base = "base.HEX" if is_hex(f.name) and not signed else "base.DEC"
            vs = f", VS[{lua_str(en)}]" if en else ""

            def ctor(a):
                return f"ProtoField.{kind}({lua_str(a)}, {lua_str(label)}, {base}{vs})"
        var = self.pf("omsd." + path, ctor)
        if var is None:
            var = self.pf("omsd." + sname + "." + path, ctor)
        if var is None:
            raise GenError(f"struct {sname}: no unique field name for {path}")
        return var

    def struct_table(self, sname, prefix, out, emitted):
        """Emit S[prefix-qualified struct] = { size, fields } (recursively for members).
        Field paths are the member names joined by dots under the message (oid.user)."""
        key = sname + ("@" + prefix if prefix else "")
        if key in emitted:
            return key
        emitted.add(key)
        st = self.s.structs[sname]
        rows = []
        for f in st.fields:
            path = (prefix + "." if prefix else "") + f.name
            row = {"name": lua_str(f.name), "off": f.offset, "size": f.size,
                   "esize": f.elem_size, "n": f.count}
            if f.struct == MSG_HDR:
                row["hdr"] = "true"
            elif f.struct:
                row["sub"] = lua_str(self.struct_table(f.struct, path, out, emitted))
                def none(a, p=path):
                    return f"ProtoField.none({lua_str(a)}, {lua_str(p)})"
                row["tree"] = self.pf("omsd." + path, none) or \
                    self.pf("omsd." + sname + "." + path, none)
                if row["tree"] is None:
                    raise GenError(f"struct {sname}: no unique field name for {path}")
                cf = count_field(st, f) if f.dims else None
                if cf:
                    row["countf"] = lua_str(cf)
            else:
                row["f"] = self.leaf(path, f, sname)
                if f.dims and f.ctype != "uint8_t":
                    row["elems"] = "true"
                if not f.dims:
                    row["int"] = "true"
                    row["signed"] = "true" if INT_TYPES[f.ctype][1] else "false"
                if f.name.startswith("reserved"):
                    row["reserved"] = "true"
                if f.name == "tail_len":
                    row["tail"] = "true"
            rows.append("{" + ", ".join(f"{k} = {v}" for k, v in row.items()) + "}")
        out.append(f"S[{lua_str(key)}] = {{ size = {st.size}, fields = {{\n\t"
                   + ",\n\t".join(rows) + "\n} }")
        return key

    def emit(self, port):
        s = self.s
        c = s.consts
        body = []
        emitted = set()
        for name, value, st, tail in s.types:
            self.struct_table(st, "", body, emitted)
        if "wire_entry_hdr" in s.structs:
            self.struct_table("wire_entry_hdr", "entry", body, emitted)
        fh = s.structs[FRAME_HDR]
        mh = s.structs[MSG_HDR]
        hdr_rows = []
        for st, pre in ((fh, "frame"), (mh, "msg")):
            rows = []
            for f in st.fields:
                if f.struct or f.dims:
                    raise GenError(f"struct {st.name}: header member {f.name} is not an integer")
                size, signed = INT_TYPES[f.ctype]
                kind = ("int" if signed else "uint") + str(size * 8)
                base = "base.HEX" if is_hex(f.name) else "base.DEC"
                vs = ", TYPE_VS" if (pre == "msg" and f.name == "type") else ""
                var = self.pf(f"omsd.{pre}.{f.name}", lambda a, k=kind, b=base, v=vs, n=f.name:
                              f"ProtoField.{k}({lua_str(a)}, {lua_str(n)}, {b}{v})")
                rows.append(f"{{name = {lua_str(f.name)}, off = {f.offset}, size = {size}, "
                            f"f = {var}}}")
            hdr_rows.append(",\n\t".join(rows))
        for ab, ctor in (("omsd.msg", "ProtoField.none"), ("omsd.frame", "ProtoField.none"), ("omsd.mac", "ProtoField.bytes"),
                         ("omsd.tail", "ProtoField.bytes"), ("omsd.entry", "ProtoField.none"),
                         ("omsd.entry.data", "ProtoField.bytes"),
                         ("omsd.padding", "ProtoField.bytes"),
                         ("omsd.appended", "ProtoField.bytes"),
                         ("omsd.unused", "ProtoField.bytes"),
                         ("omsd.shard_seq.oms_shard", "ProtoField.uint16"),
                         ("omsd.shard_seq.user_seq", "ProtoField.uint64")):
            self.pf(ab, lambda a, k=ctor: f"{k}({lua_str(a)}, {lua_str(a[5:])})")

        vs_lines = []
        for en, entries in sorted(s.enums.items()):
            items = ", ".join(f"[{v}] = {lua_str(n)}" for v, n in entries)
            vs_lines.append(f"VS[{lua_str(en)}] = {{ {items} }}")
        types = ",\n\t".join(
            f"[{v}] = {{ name = {lua_str(n)}, st = {lua_str(st)}, size = {s.structs[st].size}, "
            f"tail = {'true' if t else 'false'} }}" for n, v, st, t in s.types)
        type_vs = ", ".join(f"[{v}] = {lua_str(n)}" for n, v, _, _ in s.types)
        fields_decl = "\n".join(f"{self.fields[a][0]} = {self.fields[a][1]}" for a in self.order)
        named = "\n".join(f"local {nm} = {self.fields[a][0]}" for nm, a in (
            ("f_msg", "omsd.msg"), ("f_frame", "omsd.frame"), ("f_mac", "omsd.mac"), ("f_tail", "omsd.tail"),
            ("f_entry", "omsd.entry"), ("f_entry_data", "omsd.entry.data"),
            ("f_padding", "omsd.padding"), ("f_unused", "omsd.unused"),
            ("f_appended", "omsd.appended"),
            ("f_oid_shard", "omsd.shard_seq.oms_shard"),
            ("f_oid_seq", "omsd.shard_seq.user_seq")))
        user_seq_bits = 48
        if "WIRE_USER_SEQ_MAX" in c:
            user_seq_bits = (c["WIRE_USER_SEQ_MAX"] + 1).bit_length() - 1
        return fill(TEMPLATE, 
            magic=c["WIRE_MAGIC"], major=c["WIRE_VERSION_MAJOR"], minor=c["WIRE_VERSION_MINOR"],
            ext_max=c.get("WIRE_MSG_EXT_MAX", 0), f_mac=c["WIRE_FRAME_F_MAC"],
            mac_size=c["WIRE_MAC_SIZE"], frame_hdr_size=fh.size, msg_hdr_size=mh.size,
            frame_max=c.get("WIRE_FRAME_MAX", 65535), port=port, ntypes=len(s.types),
            vs="\n".join(vs_lines), type_vs=type_vs, types=types, fields=fields_decl,
            named=named, structs="\n".join(body), frame_rows=hdr_rows[0],
            msg_rows=hdr_rows[1], nfields=len(self.order), user_seq_bits=user_seq_bits,
            entry_key=lua_str("wire_entry_hdr@entry") if "wire_entry_hdr" in s.structs
            else "nil")


TEMPLATE = r"""-- SPDX-License-Identifier: Apache-2.0
-- omsd wire protocol dissector for Wireshark/tshark. GENERATED by
-- tools/dissector/gen-dissector.py from common/wire.h: do not edit, edit wire.h and rebuild.
--
--   tshark -X lua_script:omsd.lua -r capture.pcap -Y omsd
--
-- @ntypes@ message types; @nfields@ fields; frame version @major@.@minor@; UDP port @port@ (preference
-- omsd.udp_port) and a heuristic on every UDP port (magic "OMSD"), and "Decode As" omsd.

local omsd = Proto("omsd", "omsd wire protocol")

local WIRE_MAGIC = @magic@
local WIRE_VERSION_MAJOR = @major@
local WIRE_VERSION_MINOR = @minor@
local WIRE_MSG_EXT_MAX = @ext_max@
local WIRE_FRAME_F_MAC = @f_mac@
local WIRE_MAC_SIZE = @mac_size@
local FRAME_HDR_SIZE = @frame_hdr_size@
local MSG_HDR_SIZE = @msg_hdr_size@
local FRAME_MAX = @frame_max@
local USER_SEQ_BITS = @user_seq_bits@

-- Value names: every enum in wire.h (prefix stripped), by enum name.
local VS = {}
@vs@
local TYPE_VS = { @type_vs@ }

-- WIRE_TYPES(X): value -> name, struct, fixed size, has_tail.
local TYPES = {
	@types@
}

local F = {}
@fields@
@named@

local E_MALFORMED = ProtoExpert.new("omsd.malformed", "Malformed omsd frame",
	expert.group.MALFORMED, expert.severity.ERROR)
local E_RESERVED = ProtoExpert.new("omsd.reserved_nonzero", "Reserved field not zero",
	expert.group.PROTOCOL, expert.severity.WARN)
local E_VERSION = ProtoExpert.new("omsd.version_mismatch", "Frame's major version differs from the dissector's",
	expert.group.PROTOCOL, expert.severity.WARN)

omsd.fields = F
omsd.experts = { E_MALFORMED, E_RESERVED, E_VERSION }
omsd.prefs.udp_port = Pref.uint("UDP port", @port@, "UDP port of omsd nodes ([node] udp_port)")
omsd.prefs.heuristic = Pref.bool("Heuristic on all UDP ports", true,
	"Also dissect UDP payloads on other ports that start with the OMSD magic")

-- Struct layouts: offset and size of every member, computed from wire.h and checked against
-- its static_asserts at generation time.
local S = {}
@structs@

local FRAME_FIELDS = {
	@frame_rows@
}
local MSG_FIELDS = {
	@msg_rows@
}

local function read_uint(tvb, off, size)
	if size == 8 then return tvb(off, 8):le_uint64() end
	return tvb(off, size):le_uint()
end

local function is_zero(tvb, off, size)
	for i = 0, size - 1 do
		if tvb(off + i, 1):uint() ~= 0 then return false end
	end
	return true
end

-- Add the members of struct key at base to tree; lim: first byte beyond the message.
-- Returns a table of the integer member values by name, and false if the struct was cut.
local function dissect_struct(tvb, pinfo, tree, key, base, lim, vals)
	local st = S[key]
	vals = vals or {}
	for _, m in ipairs(st.fields) do
		local off = base + m.off
		if off + m.size > lim then
			tree:add_proto_expert_info(E_MALFORMED,
				string.format("truncated: %s needs %d bytes at offset %d, %d left",
					m.name, m.size, off, math.max(lim - off, 0)))
			return vals, false
		end
		if m.hdr then
			-- the message header was added by the caller
		elseif m.sub then
			local used = m.n
			if m.countf and vals[m.countf] ~= nil then
				used = math.min(tonumber(vals[m.countf]), m.n)
			end
			for i = 0, used - 1 do
				local eo = off + i * m.esize
				local label = m.n > 1 and string.format("%s[%d]", m.name, i) or m.name
				local sub = tree:add(m.tree, tvb(eo, m.esize)):set_text(label)
				local inner = dissect_struct(tvb, pinfo, sub, m.sub, eo, lim)
				if m.n == 1 then vals[m.name] = inner end
			end
			if used < m.n then
				tree:add(f_unused, tvb(off + used * m.esize, (m.n - used) * m.esize))
					:set_text(string.format("%s[%d..%d]: unused (%s = %d)", m.name, used,
						m.n - 1, m.countf, used))
			end
		elseif m.elems then
			for i = 0, m.n - 1 do
				tree:add_le(m.f, tvb(off + i * m.esize, m.esize))
			end
		else
			local item = tree:add_le(m.f, tvb(off, m.size))
			if m.int then
				local v
				if m.signed then
					v = (m.size == 8) and tvb(off, 8):le_int64() or tvb(off, m.size):le_int()
				else
					v = read_uint(tvb, off, m.size)
				end
				vals[m.name] = v
				if m.name == "shard_seq" and m.size == 8 then
					item:add(f_oid_shard, tvb(off, 8), v:rshift(USER_SEQ_BITS):tonumber())
					item:add(f_oid_seq, tvb(off, 8),
						v:band(UInt64(1):lshift(USER_SEQ_BITS) - 1))
				end
			end
			if m.reserved and not is_zero(tvb, off, m.size) then
				item:add_proto_expert_info(E_RESERVED)
			end
		end
	end
	return vals, true
end

local dissect_msgs

-- An AppendEntries tail: entry_count × (wire_entry_hdr, data_len bytes of messages).
local function dissect_entries(tvb, pinfo, tree, off, lim, count)
	local key = @entry_key@
	if key == nil then return end
	local esz = S[key].size
	for i = 1, count do
		if off + esz > lim then
			tree:add_proto_expert_info(E_MALFORMED, "entry header beyond the tail")
			return
		end
		local et = tree:add(f_entry, tvb(off, esz)):set_text(string.format("entry %d", i))
		local v = dissect_struct(tvb, pinfo, et, key, off, lim)
		off = off + esz
		local dl = v.data_len and tonumber(v.data_len) or 0
		if off + dl > lim then
			et:add_proto_expert_info(E_MALFORMED, "entry data beyond the tail")
			return
		end
		if dl > 0 then
			et:set_len(esz + dl)
			local dt = et:add(f_entry_data, tvb(off, dl))
			dissect_msgs(tvb, pinfo, dt, off, off + dl, nil)
		end
		off = off + dl
	end
end

-- Whether [off, lim) holds a whole sequence of known messages (a tail of wrapped messages).
local function looks_like_msgs(tvb, off, lim)
	if off >= lim then return false end
	while off < lim do
		if lim - off < MSG_HDR_SIZE then return false end
		local t = TYPES[tvb(off, 2):le_uint()]
		local len = tvb(off + 2, 2):le_uint()
		if t == nil or len < t.size or off + len > lim then return false end
		off = off + len
	end
	return true
end

-- One message at off (at most lim). Returns its length, 0 when it cannot go on.
local function dissect_msg(tvb, pinfo, tree, off, lim, names)
	if lim - off < MSG_HDR_SIZE then
		tree:add(f_msg, tvb(off, lim - off)):set_text("truncated message header")
			:add_proto_expert_info(E_MALFORMED,
				string.format("%d bytes left, a message header needs %d", lim - off, MSG_HDR_SIZE))
		return 0
	end
	local ty = tvb(off, 2):le_uint()
	local len = tvb(off + 2, 2):le_uint()
	local t = TYPES[ty]
	local tname = t and t.name or string.format("unknown(%d)", ty)
	local avail = math.min(len, lim - off)
	if avail < MSG_HDR_SIZE then avail = MSG_HDR_SIZE end
	local mt = tree:add(f_msg, tvb(off, avail)):set_text(tname)
	for _, h in ipairs(MSG_FIELDS) do
		mt:add_le(h.f, tvb(off + h.off, h.size))
	end
	if names then names[#names + 1] = tname end
	if t == nil then
		mt:add_proto_expert_info(E_MALFORMED, "unknown message type " .. ty)
		return (len >= MSG_HDR_SIZE and off + len <= lim) and len or 0
	end
	if len < t.size then
		mt:add_proto_expert_info(E_MALFORMED,
			string.format("%s: length %d below its size %d", tname, len, t.size))
		return 0
	end
	if off + len > lim then
		mt:add_proto_expert_info(E_MALFORMED,
			string.format("%s: length %d, only %d bytes left", tname, len, lim - off))
		dissect_struct(tvb, pinfo, mt, t.st, off, lim)
		return 0
	end
	local vals = dissect_struct(tvb, pinfo, mt, t.st, off, off + len)
	local fixed_end = off + t.size
	if t.tail then
		local tl = vals.tail_len and tonumber(vals.tail_len) or 0
		local want = (t.size + tl + 7) - (t.size + tl + 7) % 8
		if len ~= want then
			mt:add_proto_expert_info(E_MALFORMED,
				string.format("%s: length %d, tail_len %d wants %d", tname, len, tl, want))
		end
		tl = math.min(tl, off + len - fixed_end)
		if tl > 0 then
			local tt = mt:add(f_tail, tvb(fixed_end, tl))
			if vals.entry_count ~= nil then
				dissect_entries(tvb, pinfo, tt, fixed_end, fixed_end + tl, tonumber(vals.entry_count))
			elseif looks_like_msgs(tvb, fixed_end, fixed_end + tl) then
				dissect_msgs(tvb, pinfo, tt, fixed_end, fixed_end + tl, nil)
			end
		end
		if fixed_end + tl < off + len then
			mt:add(f_padding, tvb(fixed_end + tl, off + len - fixed_end - tl))
		end
	elseif len ~= t.size then
		-- Fields a newer minor appended after the struct: whole words, a bounded number.
		local extra = len - t.size
		local item = mt:add(f_appended, tvb(fixed_end, extra))
		if extra % 8 ~= 0 or extra > WIRE_MSG_EXT_MAX then
			item:add_proto_expert_info(E_MALFORMED,
				string.format("%s: length %d, its size is %d (a minor appends up to %d bytes, in 8s)",
					tname, len, t.size, WIRE_MSG_EXT_MAX))
		else
			item:set_text(string.format("Appended by a newer minor: %d bytes (not decoded)", extra))
		end
	end
	if vals.user ~= nil and vals.cl_ord_id ~= nil then
		mt:append_text(string.format(" user=%s cl_ord_id=%s", tostring(vals.user),
			tostring(vals.cl_ord_id)))
	elseif vals.user ~= nil then
		mt:append_text(" user=" .. tostring(vals.user))
	end
	return len
end

-- Messages back to back in [off, lim); count: how many the frame header announced (nil: any).
dissect_msgs = function(tvb, pinfo, tree, off, lim, count, names)
	local n = 0
	while off < lim do
		local len = dissect_msg(tvb, pinfo, tree, off, lim, names)
		if len == 0 then return n, false end
		off = off + len
		n = n + 1
	end
	if count ~= nil and n ~= count then
		tree:add_proto_expert_info(E_MALFORMED,
			string.format("frame announces %d messages, holds %d", count, n))
	end
	return n, true
end

local function dissect_frame(tvb, pinfo, root)
	local len = tvb:len()
	pinfo.cols.protocol = "OMSD"
	local tree = root:add(omsd, tvb())
	if len < FRAME_HDR_SIZE then
		tree:add_proto_expert_info(E_MALFORMED,
			string.format("%d bytes, a frame header needs %d", len, FRAME_HDR_SIZE))
		pinfo.cols.info = "omsd: truncated frame header"
		return len
	end
	local fh = tree:add(f_frame, tvb(0, FRAME_HDR_SIZE)):set_text("Frame header")
	local v = {}
	for _, h in ipairs(FRAME_FIELDS) do
		fh:add_le(h.f, tvb(h.off, h.size))
		v[h.name] = tvb(h.off, h.size):le_uint()
	end
	if v.magic ~= WIRE_MAGIC then
		fh:add_proto_expert_info(E_MALFORMED, string.format("bad magic 0x%08x", v.magic))
		pinfo.cols.info = "omsd: bad magic"
		return len
	end
	-- Another major is another layout; another minor only appends fields (shown as bytes).
	if v.version_major ~= WIRE_VERSION_MAJOR then
		fh:add_proto_expert_info(E_VERSION,
			string.format("version %d.%d, this dissector was generated for %d.%d", v.version_major,
				v.version_minor, WIRE_VERSION_MAJOR, WIRE_VERSION_MINOR))
	end
	if v.reserved ~= nil and v.reserved ~= 0 then
		fh:add_proto_expert_info(E_RESERVED)
	end
	local body_end = len
	if math.floor(v.flags / WIRE_FRAME_F_MAC) % 2 == 1 then
		if len < FRAME_HDR_SIZE + WIRE_MAC_SIZE then
			tree:add_proto_expert_info(E_MALFORMED, "MAC flag set, no room for the MAC")
			return len
		end
		body_end = len - WIRE_MAC_SIZE
		tree:add(f_mac, tvb(body_end, WIRE_MAC_SIZE))
	end
	if v.length ~= len then
		fh:add_proto_expert_info(E_MALFORMED,
			string.format("frame length %d, datagram %d bytes", v.length, len))
	end
	if v.length > FRAME_MAX then
		fh:add_proto_expert_info(E_MALFORMED, string.format("frame length %d over %d", v.length, FRAME_MAX))
	end
	local names = {}
	local n = dissect_msgs(tvb, pinfo, tree, FRAME_HDR_SIZE, body_end, v.msg_count, names)
	tree:append_text(string.format(", sender %d, %d message%s", v.sender_id, n, n == 1 and "" or "s"))
	-- Info: the type names, runs collapsed (NEW_ORDER x3, CANCEL).
	local parts, last, run = {}, nil, 0
	for i = 1, #names + 1 do
		local nm = names[i]
		if nm ~= last then
			if last ~= nil then parts[#parts + 1] = run > 1 and (last .. " x" .. run) or last end
			last, run = nm, 0
		end
		run = run + 1
	end
	pinfo.cols.info = string.format("sender %d: %s", v.sender_id, table.concat(parts, ", "))
	return len
end

function omsd.dissector(tvb, pinfo, tree)
	return dissect_frame(tvb, pinfo, tree)
end

local function heuristic(tvb, pinfo, tree)
	if not omsd.prefs.heuristic then return false end
	if tvb:len() < FRAME_HDR_SIZE or tvb(0, 4):le_uint() ~= WIRE_MAGIC then return false end
	dissect_frame(tvb, pinfo, tree)
	return true
end

local udp_table = DissectorTable.get("udp.port")
local registered_port = @port@
udp_table:add(registered_port, omsd)
omsd:register_heuristic("udp", heuristic)

function omsd.prefs_changed()
	if omsd.prefs.udp_port ~= registered_port then
		udp_table:remove(registered_port, omsd)
		registered_port = omsd.prefs.udp_port
		udp_table:add(registered_port, omsd)
	end
end
"""


# ------------------------------------------------------------------------------------------
# Self-test (--check): the parser on small schemas, good and wrong.
# ------------------------------------------------------------------------------------------

CHECK_BASE = r"""
#define WIRE_MAGIC UINT32_C(0x44534d4f)
#ifndef WIRE_MINOR_BUMP
#define WIRE_MINOR_BUMP 0
#endif
#define WIRE_VERSION_MAJOR 4
#define WIRE_VERSION_MINOR (1 + WIRE_MINOR_BUMP)
#define WIRE_FRAME_F_MAC 0x01
#define WIRE_MAC_SIZE 16
#define N_MAX 3
enum wire_side { WIRE_SIDE_BUY = 1, WIRE_SIDE_SELL = 2, };
#define WIRE_REASONS(X) X(NONE, 0) X(BAD, 1) /* c */ X(MAX, 2)
enum wire_reason {
#define R(name, value) WIRE_REASON_##name = value,
	WIRE_REASONS(R)
#undef R
};
struct wire_frame_hdr {
	uint32_t magic; uint8_t version_major; uint8_t flags; uint16_t msg_count;
	uint32_t sender_id; uint16_t length; uint8_t version_minor; uint8_t reserved;
};
static_assert(sizeof(struct wire_frame_hdr) == 16, "f");
struct wire_msg_hdr { uint16_t type; uint16_t length; uint16_t shard; uint16_t flags; };
static_assert(sizeof(struct wire_msg_hdr) == 8, "m");
struct wire_pair {
	uint64_t a;
	uint8_t b; /* enum wire_side */
};
static_assert(sizeof(struct wire_pair) == 16, "p");
struct wire_one {
	struct wire_msg_hdr hdr;
	uint8_t side;
	uint8_t reserved[1];
	uint16_t reason;
	uint32_t count;
	struct wire_pair pairs[N_MAX];
	int64_t px;
};
static_assert(sizeof(struct wire_one) == 8 + 8 + 48 + 8, "one");
static_assert(offsetof(struct wire_one, pairs) == 16, "pairs");
#define WIRE_TYPES(X) X(ONE, 1, wire_one, 0, SHARD, 0)
"""


def self_check():
    ok = True

    def expect(cond, what):
        nonlocal ok
        if not cond:
            print("check FAILED:", what, file=sys.stderr)
            ok = False

    s = parse_schema(CHECK_BASE)
    one = s.structs["wire_one"]
    offs = {f.name: f.offset for f in one.fields}
    expect(offs == {"hdr": 0, "side": 8, "reserved": 9, "reason": 10, "count": 12,
                    "pairs": 16, "px": 64}, f"offsets {offs}")
    expect(one.size == 72, f"size {one.size}")
    expect(dict(s.enums["wire_side"]) == {1: "BUY", 2: "SELL"}, f"side {s.enums['wire_side']}")
    expect(dict(s.enums["wire_reason"]) == {0: "NONE", 1: "BAD"}, "reasons")
    expect(s.types == [("ONE", 1, "wire_one", False)], f"types {s.types}")
    lua = Emitter(s).emit(DEFAULT_PORT)
    expect('VS["wire_side"]' in lua and "omsd.pairs.b" in lua and "omsd.reason" in lua, "lua")
    expect("local WIRE_VERSION_MAJOR = 4" in lua and "local WIRE_VERSION_MINOR = 1" in lua
           and "omsd.frame.version_minor" in lua, "lua: the version major.minor")

    bad = {
        "size": CHECK_BASE.replace("== 8 + 8 + 48 + 8", "== 80"),
        "offset": CHECK_BASE.replace("pairs) == 16", "pairs) == 24"),
        "type": CHECK_BASE.replace("int64_t px;", "double px;"),
        "union": CHECK_BASE.replace("int64_t px;", "union { int64_t a; } px;"),
        "bitfield": CHECK_BASE.replace("int64_t px;", "int64_t px : 8;"),
        "unasserted": CHECK_BASE.replace('static_assert(sizeof(struct wire_one) == 8 + 8 + 48 + 8, "one");', ""),
    }
    for what, text in bad.items():
        try:
            parse_schema(text)
            expect(False, f"{what}: accepted")
        except GenError as e:
            expect("wire_one" in str(e) or what == "union", f"{what}: message {e}")
    print("gen-dissector: self-check", "passed" if ok else "FAILED")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description="Generate omsd.lua from common/wire.h")
    ap.add_argument("wire_h", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help="UDP port (default 7400)")
    ap.add_argument("--check", action="store_true", help="self-test the parser")
    a = ap.parse_args()
    if a.check:
        return self_check()
    if not a.wire_h or not a.out:
        ap.error("WIRE_H and OUT are required")
    try:
        with open(a.wire_h, encoding="utf-8") as fh:
            text = fh.read()
        schema = parse_schema(text)
        lua = Emitter(schema).emit(a.port)
    except GenError as e:
        print(f"gen-dissector: {a.wire_h}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"gen-dissector: {e}", file=sys.stderr)
        return 1
    with open(a.out, "w", encoding="utf-8") as fh:
        fh.write(lua)
    return 0


if __name__ == "__main__":
    sys.exit(main())
