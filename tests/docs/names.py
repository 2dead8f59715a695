"""Names that comments and docs write, checked against the C++ sources (check_docs.py, check 5).

A comment that says `Type::member` (or a constant `kName`) points a reader at code; when the code is
renamed or removed the comment still compiles, and goes stale. stale_names() finds the ones it can
resolve and that name nothing:

- `Type::member` in a code comment (C++ `//` and `/* */`; `#` in Python, shell, CMake, the schema)
  or in a backtick span of docs/design.md or README.md, where Type is a class, struct, union or enum
  declared in the tree: stale unless `member` is a word of one of Type's bodies (or of a base it
  names that is declared here) or `Type::member` appears in code. `Type::prefix_*` matches any
  member starting so. Types not declared here (std::, Cap'n Proto's wire::, templates' parameters,
  aliases) are skipped: nothing to resolve them against.
- A constant `kName` in a C++ comment or a backtick span of the docs: stale unless some code names it.

bench/README.md is left out on purpose: it is dated history, and names the code as it was then.
"""
import re

CXX = re.compile(r"\.(h|cpp|cu|cuh)$")
HASH_COMMENTED = re.compile(r"\.(py|sh|capnp|cmake)$|CMakeLists\.txt$")
DOCS = ("docs/design.md", "README.md")

# Comments and string and character literals, blanked in code so that only code is searched.
_not_code = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|(?<!\w)\'(?:\\.|[^\'\\\n])*\'', re.S)
_hash_comment = re.compile(r"#[^\n]*")
_backticks = re.compile(r"`[^`\n]+`")
_declaration = re.compile(r"\b(?:class|struct|union|enum)\s+(?:class\s+|struct\s+)?(?:\[\[[^\]]*\]\]\s*)?"
                          r"(?:alignas\([^)]*\)\s*)?(\w+)(?:\s+final)?\s*(:[^;{]*)?\{")
_qualified = re.compile(r"\b([A-Z]\w*)::~?(\w+)")
_reference = re.compile(r"(?<![\w:])((?:\w+::)*)([A-Z]\w*)::~?([A-Za-z_]\w*\*?)")
_constant = re.compile(r"(?<![\w:])k[A-Z]\w*[a-z]\w*")  # kName, not a unit such as kB
# Namespaces whose types are not ours, and Cap'n Proto's generated wire:: types (named like ours).
_foreign = {"std", "boost", "asio", "capnp", "kj", "fmt", "CLI", "cub", "thrust", "nlohmann", "py",
            "pybind11", "wire", "Catch", "cuda", "chrono"}


def _blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))


class CodeNames:
    """What the C++ sources declare: each type's bodies and bases, qualified names used, constants."""

    def __init__(self, sources):
        self.bodies = {}  # type name -> [(body text, [base names])]
        self.used = set()  # (Type, member) written in code: a definition or a use
        self.constants = set()
        for text in sources.values():
            code = _not_code.sub(_blank, text)
            for m in _declaration.finditer(code):
                depth, i = 1, m.end()
                while depth and i < len(code):
                    depth += {"{": 1, "}": -1}.get(code[i], 0)
                    i += 1
                bases = []
                if m.group(2) and not m.group(2).startswith("::"):
                    plain = re.sub(r"\b(?:public|private|protected|virtual)\b|<[^{]*?>", " ", m.group(2)[1:])
                    bases = re.findall(r"(\w+)\s*(?:,|$)", plain.strip())
                self.bodies.setdefault(m.group(1), []).append((code[m.end():i], bases))
            self.used |= set(_qualified.findall(code))
            self.constants |= set(_constant.findall(code))

    def declares(self, type_name, member, seen=()):
        if member.endswith("*"):
            prefix = re.escape(member[:-1]) + r"\w*"
            if any(t == type_name and re.fullmatch(prefix, m) for t, m in self.used):
                return True
        else:
            prefix = re.escape(member)
            if (type_name, member) in self.used:
                return True
        for body, bases in self.bodies.get(type_name, []):
            if re.search(r"\b" + prefix + r"\b", body):
                return True
            if any(b in self.bodies and b not in seen and self.declares(b, member, seen + (type_name,)) for b in bases):
                return True
        return False

    def stale_in(self, text, constants=True):
        """The names in `text` (a comment or a backtick span) that the code does not have."""
        out = []
        for m in _reference.finditer(text):
            if any(p in _foreign for p in m.group(1).split("::")):
                continue
            type_name, member = m.group(2), m.group(3)
            if type_name in self.bodies and not self.declares(type_name, member):
                out.append(f"{type_name}::{member}, which {type_name} does not declare")
        if constants:
            for name in _constant.findall(text):
                if name not in self.constants:
                    out.append(f"{name}, which no code defines")
        return out


def stale_names(files, read):
    """One line per stale name in `files` (paths; `read` gives a file's text): "FILE:LINE: names ..."."""
    sources = {f: read(f) for f in files if CXX.search(f)}
    names = CodeNames(sources)
    problems = []

    def check(f, text, spans, constants):
        for m in spans.finditer(text):
            if m.group(0)[0] in "\"'":
                continue  # a string literal, not a comment
            for stale in names.stale_in(m.group(0), constants):
                problems.append(f"{f}:{text.count(chr(10), 0, m.start()) + 1}: names {stale}")

    for f in files:
        if CXX.search(f):
            check(f, sources[f], _not_code, True)
        elif HASH_COMMENTED.search(f):
            check(f, read(f), _hash_comment, False)
        elif f in DOCS:
            check(f, read(f), _backticks, True)
    return problems
