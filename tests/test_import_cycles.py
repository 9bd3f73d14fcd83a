"""No import circles anywhere: not between sibling modules (import-linter's ``acyclic_siblings`` contract sees
those), nor between a package and its own modules, nor through an import made for the type checker only.

A circle any of these ways means one of its modules cannot be read, or moved, without the others.
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp

PACKAGES = ("sessionwatch", "benchmarks")


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)


def _circles(modules: Iterable[str], imports: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other through imports (strongly connected, two or more), each
    sorted (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(imports[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def _one_circle(group: list[str], imports: dict[str, set[str]]) -> list[str]:
    """A shortest walk from the group's first module back to it, to show in the failure."""
    start = group[0]
    members = set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for step in sorted(imports[node] & members):
                if step == start:
                    return [*paths[node], start]
                if step not in paths:
                    paths[step] = [*paths[node], step]
                    following.append(step)
        frontier = following
    return group


def _explained(path: list[str], graph: grimp.ImportGraph) -> str:
    lines = [path[0]]
    for importer, imported in zip(path, path[1:], strict=False):
        detail = graph.get_import_details(importer=importer, imported=imported)
        where = f" (line {detail[0]['line_number']}: {detail[0]['line_contents']})" if detail else ""
        lines.append(f"  -> {imported}{where}")
    return "\n".join(lines)


def test_the_circle_finder_finds_a_package_and_its_own_module() -> None:
    imports = {"p": {"p.a"}, "p.a": {"p"}, "p.b": {"p.a"}, "q": set()}
    assert _circles(imports, imports) == [["p", "p.a"]]
    assert _one_circle(["p", "p.a"], imports) == ["p", "p.a", "p"]


def test_no_module_imports_its_way_back_to_itself() -> None:
    graph = _graph()
    modules = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    imports = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    found = [_explained(_one_circle(group, imports), graph) for group in _circles(modules, imports)]
    assert found == [], "import circles (type-checking imports count):\n" + "\n\n".join(found)
