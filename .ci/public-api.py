#!/usr/bin/env python3
"""The crate's public API, one item a line, from rustdoc's JSON output.

    python3 .ci/public-api.py            # print it
    python3 .ci/public-api.py --check    # compare with docs/public-api.txt (CI)
    python3 .ci/public-api.py --write    # rewrite docs/public-api.txt

It runs `cargo rustdoc --output-format json` (an unstable rustdoc option, so
with RUSTC_BOOTSTRAP=1 on the stable toolchain) for the library with every
feature, walks the items reachable from the crate root through public
modules and re-exports, and prints each one: its path and kind, a function's
signature, a struct's public fields, an enum's variants, a trait's items and
the traits a type implements (blanket impls left out). A change to the
public API then shows as a diff of docs/public-api.txt: deliberate, and
reviewed with the change that makes it.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LISTING = os.path.join(ROOT, "docs", "public-api.txt")
TARGET = os.path.join(ROOT, "target", "public-api")
# The rustdoc JSON format this walker reads (rustdoc's `format_version`).
FORMAT = 57
# Auto traits that are not stable Rust (so no user can name them).
UNSTABLE_AUTO = {"core::marker::Freeze", "core::marker::UnsafeUnpin"}


def rustdoc_json():
    env = dict(os.environ, RUSTC_BOOTSTRAP="1", RUSTDOCFLAGS="")
    subprocess.run(
        ["cargo", "rustdoc", "--quiet", "-p", "redisson-lock", "--lib", "--all-features",
         "--target-dir", TARGET, "--", "-Z", "unstable-options", "--output-format", "json"],
        check=True, cwd=ROOT, env=env)
    with open(os.path.join(TARGET, "doc", "redisson_lock.json")) as f:
        return json.load(f)


class Render:
    def __init__(self, doc):
        self.index = doc["index"]
        self.paths = doc["paths"]

    def generic_args(self, args):
        if not args:
            return ""
        if "angle_bracketed" in args:
            a = args["angle_bracketed"]
            parts = []
            for arg in a["args"]:
                if "type" in arg:
                    parts.append(self.ty(arg["type"]))
                elif "lifetime" in arg:
                    parts.append(arg["lifetime"])
                elif "const" in arg:
                    parts.append(arg["const"].get("expr", "_"))
                else:
                    parts.append("_")
            for c in a.get("constraints", []):
                binding = c.get("binding", {})
                if "equality" in binding:
                    eq = binding["equality"]
                    val = self.ty(eq["type"]) if "type" in eq else str(eq)
                    parts.append(f"{c['name']} = {val}")
                else:
                    parts.append(f"{c['name']}: {self.bounds(binding.get('constraint', []))}")
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in args:
            p = args["parenthesized"]
            out = f"({', '.join(self.ty(t) for t in p['inputs'])})"
            if p.get("output"):
                out += f" -> {self.ty(p['output'])}"
            return out
        return ""

    def path(self, p):
        return self.name(p) + self.generic_args(p.get("args"))

    def name(self, p):
        """This crate's items by their own name (the walk gives where they
        are public); others by their canonical path."""
        known = self.paths.get(str(p["id"]))
        if known is None:
            return p["path"].split("::")[-1]
        if known["crate_id"] == 0:
            return known["path"][-1]
        return "::".join(known["path"])

    def bounds(self, bounds):
        out = []
        for b in bounds:
            if "trait_bound" in b:
                tb = b["trait_bound"]
                prefix = {"maybe": "?", "maybe_const": "~const "}.get(tb.get("modifier"), "")
                out.append(prefix + self.path(tb["trait"]))
            elif "outlives" in b:
                out.append(b["outlives"])
            elif "use" in b:
                out.append("use<" + ", ".join(str(u) for u in b["use"]) + ">")
        return " + ".join(out)

    def ty(self, t):
        if t is None:
            return "()"
        (kind, v), = t.items()
        if kind == "resolved_path":
            return self.path(v)
        if kind == "generic" or kind == "primitive":
            return v
        if kind == "borrowed_ref":
            lt = f"{v['lifetime']} " if v.get("lifetime") else ""
            mut = "mut " if v["is_mutable"] else ""
            return f"&{lt}{mut}{self.ty(v['type'])}"
        if kind == "tuple":
            return "(" + ", ".join(self.ty(x) for x in v) + ("," if len(v) == 1 else "") + ")"
        if kind == "slice":
            return f"[{self.ty(v)}]"
        if kind == "array":
            return f"[{self.ty(v['type'])}; {v['len']}]"
        if kind == "impl_trait":
            return "impl " + self.bounds(v)
        if kind == "dyn_trait":
            traits = [self.path(p["trait"]) for p in v["traits"]]
            if v.get("lifetime"):
                traits.append(v["lifetime"])
            return "dyn " + " + ".join(traits)
        if kind == "raw_pointer":
            return ("*mut " if v["is_mutable"] else "*const ") + self.ty(v["type"])
        if kind == "qualified_path":
            trait = self.path(v["trait"]) if v.get("trait") else "_"
            return f"<{self.ty(v['self_type'])} as {trait}>::{v['name']}"
        if kind == "function_pointer":
            return "fn(" + ", ".join(self.ty(i[1]) for i in v["sig"]["inputs"]) + ")" + (
                f" -> {self.ty(v['sig']['output'])}" if v["sig"].get("output") else "")
        if kind == "infer":
            return "_"
        return f"<{kind}>"

    def generics(self, g):
        params = []
        for p in g["params"]:
            k = p["kind"]
            if "lifetime" in k:
                params.append(p["name"])
            elif "type" in k:
                if k["type"].get("is_synthetic"):
                    continue
                b = self.bounds(k["type"]["bounds"])
                params.append(p["name"] + (f": {b}" if b else ""))
            elif "const" in k:
                params.append(f"const {p['name']}: {self.ty(k['const']['type'])}")
        out = "<" + ", ".join(params) + ">" if params else ""
        wheres = []
        for w in g.get("where_predicates", []):
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                wheres.append(f"{self.ty(bp['type'])}: {self.bounds(bp['bounds'])}")
            elif "lifetime_predicate" in w:
                lp = w["lifetime_predicate"]
                wheres.append(f"{lp['lifetime']}: {' + '.join(lp['outlives'])}")
            elif "eq_predicate" in w:
                ep = w["eq_predicate"]
                wheres.append(f"{self.ty(ep['lhs'])} = {self.ty(ep['rhs'].get('type'))}")
        return out, (" where " + ", ".join(wheres) if wheres else "")

    def function(self, name, f):
        h = f["header"]
        head = "".join(w for w, on in [("const ", h["is_const"]), ("async ", h["is_async"]),
                                      ("unsafe ", h["is_unsafe"])] if on)
        gens, wheres = self.generics(f["generics"])
        args = []
        for arg, t in f["sig"]["inputs"]:
            if arg == "self":
                s = self.ty(t)
                args.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(
                    s, f"self: {s}"))
            else:
                args.append(f"{arg}: {self.ty(t)}")
        out = f"{head}fn {name}{gens}({', '.join(args)})"
        if f["sig"].get("output") is not None:
            out += f" -> {self.ty(f['sig']['output'])}"
        return out + wheres


class Walk:
    def __init__(self, doc):
        self.doc = doc
        self.index = doc["index"]
        self.r = Render(doc)
        self.lines = []
        self.seen = set()

    def item(self, id_):
        return self.index.get(str(id_))

    def emit(self, line):
        self.lines.append(line)

    def module(self, m, path):
        for id_ in m["inner"]["module"]["items"]:
            it = self.item(id_)
            if it is None or it["visibility"] != "public":
                continue
            inner = it["inner"]
            if "use" in inner:
                u = inner["use"]
                target = self.item(u["id"]) if u.get("id") is not None else None
                if target is None:
                    self.emit(f"pub use {u['source']}{'::*' if u['is_glob'] else ''}"
                              f" as {path}::{u['name']}")
                    continue
                if u["is_glob"]:
                    self.module(target, path)
                else:
                    self.named(target, f"{path}::{u['name']}")
            else:
                self.named(it, f"{path}::{it['name']}")

    def named(self, it, path):
        inner = it["inner"]
        (kind, v), = inner.items()
        if kind == "module":
            self.emit(f"pub mod {path}")
            self.module(it, path)
        elif kind == "function":
            self.emit(f"pub {self.r.function(path, v)}")
        elif kind == "struct":
            gens, wheres = self.r.generics(v["generics"])
            self.emit(f"pub struct {path}{gens}{wheres}")
            sk = v["kind"]
            if isinstance(sk, dict) and "plain" in sk:
                for fid in sk["plain"]["fields"]:
                    f = self.item(fid)
                    if f and f["visibility"] == "public":
                        self.emit(f"pub {path}::{f['name']}: {self.r.ty(f['inner']['struct_field'])}")
                if sk["plain"].get("has_stripped_fields"):
                    self.emit(f"{path}: private fields")
            elif isinstance(sk, dict) and "tuple" in sk:
                fields = ["_" if f is None else self.r.ty(self.item(f)["inner"]["struct_field"])
                          for f in sk["tuple"]]
                self.emit(f"{path}: tuple ({', '.join(fields)})")
            self.impls(v["impls"], path)
        elif kind == "enum":
            gens, wheres = self.r.generics(v["generics"])
            self.emit(f"pub enum {path}{gens}{wheres}")
            for vid in v["variants"]:
                var = self.item(vid)
                vk = var["inner"]["variant"]["kind"]
                if vk == "plain":
                    self.emit(f"pub {path}::{var['name']}")
                elif "tuple" in vk:
                    fields = ["_" if f is None else
                              self.r.ty(self.item(f)["inner"]["struct_field"]) for f in vk["tuple"]]
                    self.emit(f"pub {path}::{var['name']}({', '.join(fields)})")
                elif "struct" in vk:
                    fields = [f"{self.item(f)['name']}: "
                              f"{self.r.ty(self.item(f)['inner']['struct_field'])}"
                              for f in vk["struct"]["fields"]]
                    self.emit(f"pub {path}::{var['name']} {{ {', '.join(fields)} }}")
            self.impls(v["impls"], path)
        elif kind == "trait":
            gens, wheres = self.r.generics(v["generics"])
            sup = self.r.bounds(v["bounds"])
            self.emit(f"pub trait {path}{gens}{': ' + sup if sup else ''}{wheres}")
            for iid in v["items"]:
                self.assoc(self.item(iid), f"{path}::")
        elif kind == "type_alias":
            gens, wheres = self.r.generics(v["generics"])
            self.emit(f"pub type {path}{gens} = {self.r.ty(v['type'])}{wheres}")
        elif kind == "constant":
            self.emit(f"pub const {path}: {self.r.ty(v['type'])}")
        elif kind == "static":
            self.emit(f"pub static {path}: {self.r.ty(v['type'])}")
        elif kind in ("macro", "proc_macro"):
            self.emit(f"macro {path}")
        else:
            self.emit(f"{kind} {path}")

    def assoc(self, it, prefix):
        if it is None:
            return
        (kind, v), = it["inner"].items()
        if kind == "function":
            self.emit(f"pub {self.r.function(prefix + it['name'], v)}")
        elif kind == "assoc_type":
            b = self.r.bounds(v.get("bounds", []))
            val = f" = {self.r.ty(v['type'])}" if v.get("type") else ""
            self.emit(f"pub type {prefix}{it['name']}{': ' + b if b else ''}{val}")
        elif kind == "assoc_const":
            self.emit(f"pub const {prefix}{it['name']}: {self.r.ty(v['type'])}")

    def impls(self, ids, path):
        inherent, traits = [], []
        for iid in ids:
            imp = self.item(iid)
            i = imp["inner"]["impl"]
            if i.get("blanket_impl") is not None:
                continue
            gens, wheres = self.r.generics(i["generics"])
            for_ = self.r.ty(i["for"])
            if i.get("trait") is None:
                # `impl Foo<Fenced>`: its methods as `Foo<Fenced>::m`; a
                # generic `impl<K> Foo<K>` as `Foo::m`.
                own = set(p["name"] for p in i["generics"]["params"])
                args = i["for"].get("resolved_path", {}).get("args")
                shown = self.r.generic_args(args)
                if shown[1:-1].split(", ") and set(shown[1:-1].split(", ")) <= own:
                    shown = ""
                inherent.append((for_, shown, i))
            elif self.r.name(i["trait"]) in UNSTABLE_AUTO:
                continue
            else:
                neg = "!" if i.get("is_negative") else ""
                traits.append(f"impl{gens} {neg}{self.r.path(i['trait'])} for {for_}{wheres}")
        methods = []
        for for_, args, i in inherent:
            for mid in i["items"]:
                m = self.item(mid)
                if m is None or m["visibility"] != "public":
                    continue
                methods.append((m["name"], args, m))
        for name, args, m in sorted(methods, key=lambda x: (x[0], x[1])):
            self.assoc(m, f"{path}{args}::")
        for t in sorted(set(traits)):
            self.emit(t)


def listing():
    doc = rustdoc_json()
    if doc["format_version"] != FORMAT:
        sys.exit(f"public-api.py reads rustdoc JSON format {FORMAT}; this rustdoc writes "
                 f"{doc['format_version']}: update the walker (and the listing) with the toolchain")
    w = Walk(doc)
    root = w.item(doc["root"])
    w.module(root, "redisson_lock")
    return "".join(line + "\n" for line in w.lines)


def main():
    text = listing()
    if "--write" in sys.argv:
        with open(LISTING, "w") as f:
            f.write(text)
    elif "--check" in sys.argv:
        with open(LISTING) as f:
            old = f.read()
        if old != text:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), "docs/public-api.txt", "now"))
            sys.exit("the public API changed: if that is meant, run "
                     "`python3 .ci/public-api.py --write` and commit docs/public-api.txt")
        print(f"public API unchanged ({len(text.splitlines())} lines)")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
