#!/usr/bin/env python3
"""Checks the Markdown documentation of a checkout:
  - README.md stays short (at most 12 KiB): the rest belongs in docs/ or CONTRIBUTING.md;
  - every docs/*.md page is linked from README.md;
  - every relative link in the repository's Markdown files names a file that exists and, with a
    #fragment into a Markdown file, a heading of that file (GitHub's anchor rules).
  tests/docs/check_docs.py [REPOSITORY_ROOT]
Prints one line per problem and exits 1 if there is any."""
import pathlib
import re
import sys

README_LIMIT = 12 * 1024
SKIP_DIRS = {"node_modules", ".git", ".fleet"}


def markdown_files(root):
    for path in sorted(root.rglob("*.md")):
        parts = path.relative_to(root).parts
        if SKIP_DIRS.intersection(parts) or parts[0].startswith("build"):
            continue
        yield path


def without_code(text):
    """The text with fenced code blocks and inline code removed (links there are examples)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    found = set()
    for line in without_code(path.read_text()).splitlines():
        match = re.match(r"#+\s+(.*)", line)
        if match:
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            found.add(slug)
    return found


def links(path):
    for target in re.findall(r"\]\(([^)\s]+)\)", without_code(path.read_text())):
        if not re.match(r"[a-z]+:", target):  # http:, https:, mailto: are not checked here
            yield target


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    readme = root / "README.md"
    size = readme.stat().st_size
    if size > README_LIMIT:
        problems.append(f"README.md is {size} bytes, more than {README_LIMIT}: move detail to docs/")
    readme_links = {(readme.parent / t.split("#")[0]).resolve() for t in links(readme)}
    for page in sorted((root / "docs").glob("*.md")):
        if page.resolve() not in readme_links:
            problems.append(f"docs/{page.name} is not linked from README.md")
    checked = 0
    for path in markdown_files(root):
        for target in links(path):
            checked += 1
            file_part, _, fragment = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path.resolve()
            where = path.relative_to(root)
            if not dest.exists():
                problems.append(f"{where}: link to {target}: no such file")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                problems.append(f"{where}: link to {target}: no heading #{fragment} there")
    for problem in problems:
        print("FAIL", problem)
    print(f"README.md: {size} bytes; {checked} relative links checked; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
