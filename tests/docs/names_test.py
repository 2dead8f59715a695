#!/usr/bin/python3
"""tests/docs/names.py finds the stale names a comment or a doc writes, and only those (CTest).

A small tree in memory: a header that declares a few types, and comments and docs that name their
members, some that exist and some that do not. Exits 1 and prints the difference if the names
found are not exactly the stale ones.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import names  # noqa: E402

tree = {
    "src/window.h": """
struct Base { int inherited = 0; };
class Window final : public Base {
 public:
  enum class Phase : uint8_t { kOpen, kShut };
  void fill();
  int tls_ca = 0;
  static constexpr int kMaxSlots = 4;
 private:
  // Window::gone is no member: a comment inside a body is no declaration.
  int depth_ = 0;
};
// Window::fill, Window::depth_, Window::inherited, Phase::kOpen, Window::tls_* and kMaxSlots exist;
// std::vector::push_back and wire::Window::gone are not ours; Unknown::thing is not declared here.
// Window::removed and Phase::kHalfOpen do not exist, nor does kNoSuchLimit.
""",
    "src/window.cpp": """
#include "src/window.h"
void Window::fill() { const char* s = "// Window::in_a_string"; (void)s; }  // Window::fill() again
""",
    "tools/run.py": "# Window::fill and Window::renamed\n",
    "docs/design.md": "`Window::fill` and `Window::kMaxSlots`; `Window::old_name`, `kRetired`. Window::prose\n",
    "bench/README.md": "`Window::history` is dated: left alone\n",
}
found = names.stale_names(list(tree), tree.__getitem__)
expected = [
    "src/window.h:10: names Window::gone, which Window does not declare",
    "src/window.h:15: names Window::removed, which Window does not declare",
    "src/window.h:15: names Phase::kHalfOpen, which Phase does not declare",
    "src/window.h:15: names kNoSuchLimit, which no code defines",
    "tools/run.py:1: names Window::renamed, which Window does not declare",
    "docs/design.md:1: names Window::old_name, which Window does not declare",
    "docs/design.md:1: names kRetired, which no code defines",
]
if found != expected:
    print("found:\n  " + "\n  ".join(found) + "\nexpected:\n  " + "\n  ".join(expected))
    sys.exit(1)
print(f"names: the {len(expected)} stale names found, and nothing else")
