#!/usr/bin/env bash
# scripts/check-links.sh — every relative link of README.md and docs/*.md points somewhere.
#
# For each Markdown link or reference definition whose target is a path in this
# repository (not http:, https:, mailto: or another scheme):
#   - the file or directory must exist (relative to the Markdown file);
#   - an anchor (`path#anchor`, or `#anchor` within the same file) must name a
#     heading of that Markdown file, slugged as GitHub does (lowercase, spaces
#     to `-`, punctuation dropped, `-1`, `-2`… for repeated headings), or an
#     explicit `<a name="…">` / `id="…"`.
# Links inside code blocks and inline code are not links and are skipped.
# Image references (`![alt](path)`) are checked too when run with --images.
#
# Prints each broken link as FILE:LINE: target (reason) and exits 1 if any;
# needs only bash and python3 (standard library), and no network.
#
#   scripts/check-links.sh [--images] [FILE.md …]   (default: README.md docs/*.md)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

images=0
files=()
for arg in "$@"; do
  case "$arg" in
    --images) images=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) files+=("$arg") ;;
  esac
done
if [ ${#files[@]} -eq 0 ]; then
  files=(README.md)
  for f in docs/*.md; do [ -e "$f" ] && files+=("$f"); done
fi

CHECK_IMAGES="$images" exec python3 - "${files[@]}" <<'PY'
import os, re, sys, unicodedata

check_images = os.environ.get("CHECK_IMAGES") == "1"
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE_CODE = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.S)
# [text](target) or ![alt](target); the target may be <…> and may carry a "title".
LINK = re.compile(r"(!?)\[((?:(?!\n[ \t]*\n)[^\[\]]|\[[^\[\]]*\])*)\]\([ \t]*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[([^\]]+)\]:[ \t]*(<[^>]*>|\S+)", re.M)
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']|\bid\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose_lines(text):
    """Yields (line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            continue
        yield n, line


def prose(text):
    """The text with code blocks emptied and inline code blanked, line numbers kept."""
    lines = [""] * len(text.split("\n"))
    for n, line in prose_lines(text):
        lines[n - 1] = line
    joined = "\n".join(lines)
    return INLINE_CODE.sub(lambda c: re.sub(r"[^\n]", " ", c.group(0)), joined)


def heading_text(raw):
    """The text GitHub slugs: inline markup and links reduced to their words."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)   # links and images: their text
    t = re.sub(r"<[^>]+>", "", t)                         # HTML tags
    return t


def slug(text):
    out = []
    for ch in heading_text(text).strip().lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LNM":
            out.append("-" if ch == " " else ch)
    return "".join(out)


_anchors = {}
def anchors(path):
    if path not in _anchors:
        found, seen = set(), {}
        text = open(path, encoding="utf-8").read()
        # headings are read from the raw lines (inline code keeps its words)
        raw = text.split("\n")
        prev = None
        for n, _ in prose_lines(text):
            line = raw[n - 1]
            title = None
            m = HEADING.match(line)
            if m:
                title = m.group(2)
            elif prev is not None and prev.strip() and SETEXT.match(line) and not HEADING.match(prev):
                title = prev.strip()
            if title is not None:
                base = slug(title)
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else f"{base}-{k}")
            for a in HTML_ANCHOR.finditer(line):
                found.add(a.group(1) or a.group(2))
            prev = line
        _anchors[path] = found
    return _anchors[path]


def check(md, n, target, broken):
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME.match(target) or target.startswith("//"):
        return
    path, _, anchor = target.partition("#")
    path = path.split("?", 1)[0]
    if path:
        dest = os.path.normpath(os.path.join(os.path.dirname(md), path.replace("%20", " ")))
        if dest.startswith(".." + os.sep) or dest == "..":
            broken.append(f"{md}:{n}: {target} (outside the repository)")
            return
        if not os.path.exists(dest):
            broken.append(f"{md}:{n}: {target} (no such file)")
            return
    else:
        dest = md
    if anchor:
        if os.path.isdir(dest) or not dest.lower().endswith((".md", ".markdown")):
            broken.append(f"{md}:{n}: {target} (an anchor into a file that is not Markdown)")
        elif anchor not in anchors(dest):
            broken.append(f"{md}:{n}: {target} (no heading #{anchor} in {dest})")


broken, count = [], 0
for md in sys.argv[1:]:
    if not os.path.isfile(md):
        broken.append(f"{md}: no such file")
        continue
    text = prose(open(md, encoding="utf-8").read())
    line_of = lambda pos: text.count("\n", 0, pos) + 1
    for m in REFDEF.finditer(text):
        count += 1
        check(md, line_of(m.start(2)), m.group(2), broken)
    for l in LINK.finditer(text):
        if l.group(1) and not check_images:
            continue
        count += 1
        check(md, line_of(l.start(3)), l.group(3), broken)

for b in broken:
    print(b)
files = len(sys.argv) - 1
if broken:
    print(f"check-links: {len(broken)} broken of {count} links in {files} files", file=sys.stderr)
    sys.exit(1)
print(f"check-links: {count} links in {files} files, none broken")
PY
