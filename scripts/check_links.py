#!/usr/bin/env python3
"""Checks that the user documentation's links resolve inside the repository.

Checked files: README.md, docs/*.md and softmpcomm/README.md (or the files
named on the command line, relative to --root). In each, outside fenced code
blocks and code spans:

- a relative link ([text](path), ![alt](path), [name]: path, <path>) must
  name a file or folder inside the repository, and its #anchor, where the
  target is a Markdown file, one of that file's headings (GitHub's anchors);
- a link that leaves the repository (an absolute path, or ../ past the root)
  is an error;
- an http(s) link, bare or in brackets, is an error in README.md and allowed
  in docs/ only when it starts with an entry of ALLOWED_EXTERNAL;
- a mention of a Markdown file (`name.md`, in text or a code span) must name
  a file of the repository (beside the page, or from the root), and a code
  span starting with ../ must stay inside the repository.

Each error is one line, file:line: the link and why; the exit status is 1
when there is any. --self-test runs the checker over a scratch tree with one
broken link of each kind and fails unless each is reported.
"""

import argparse
import os
import re
import sys
import tempfile

# Public pages a docs/ page may link to: the upstream project the user
# integrates with. README.md links to nothing outside the repository.
ALLOWED_EXTERNAL = ("https://github.com/kvcache-ai/Mooncake",)

DEFAULT_FILES = ["README.md", "softmpcomm/README.md"]

FENCE_RE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); text may hold one level of [].
INLINE_LINK_RE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF_RE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
AUTOLINK_RE = re.compile(r"<((?:https?|ftp|mailto|file):[^>\s]+)>")
BARE_URL_RE = re.compile(r"(?<![(<\w])(https?://[^\s)>\]`]+)")
MD_MENTION_RE = re.compile(r"(?<![\w./-])([\w./-]*[\w-]\.md)(?![\w])")
HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def github_anchor(text):
    """The anchor GitHub gives a heading: formatting gone, lower case,
    punctuation but - and _ dropped, spaces as -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = text.strip().lower()
    text = "".join(ch for ch in text
                   if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def heading_anchors(path):
    anchors = set()
    seen = {}
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE_RE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            m = HEADING_RE.match(line)
            if not m:
                continue
            base = github_anchor(m.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else "%s-%d" % (base, count))
    return anchors


class Checker:
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.errors = []
        self.links = 0
        self._anchors = {}

    def inside(self, path):
        real = os.path.realpath(path)
        return real == self.root or real.startswith(self.root + os.sep)

    def anchors_of(self, path):
        if path not in self._anchors:
            self._anchors[path] = heading_anchors(path)
        return self._anchors[path]

    def error(self, rel, lineno, link, why):
        self.errors.append("%s:%d: link '%s': %s" % (rel, lineno, link, why))

    def check_external(self, rel, lineno, link):
        if rel == "README.md":
            self.error(rel, lineno, link,
                       "README.md links to nothing outside the repository")
        elif not link.startswith(ALLOWED_EXTERNAL):
            self.error(rel, lineno, link,
                       "external link not in check_links.py's "
                       "ALLOWED_EXTERNAL")

    def check_link(self, rel, lineno, link):
        self.links += 1
        if re.match(r"^https?://", link):
            self.check_external(rel, lineno, link)
            return
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link):
            self.error(rel, lineno, link, "only relative links are allowed")
            return
        if link.startswith("/"):
            self.error(rel, lineno, link,
                       "absolute path leaves the repository")
            return
        path_part, _, anchor = link.partition("#")
        page = os.path.join(self.root, rel)
        target = (os.path.normpath(os.path.join(os.path.dirname(page),
                                                path_part))
                  if path_part else page)
        if not self.inside(target):
            self.error(rel, lineno, link, "leaves the repository")
            return
        if not os.path.exists(target):
            self.error(rel, lineno, link, "no such file: %s" %
                       os.path.relpath(target, self.root))
            return
        if anchor:
            if not target.endswith(".md") or os.path.isdir(target):
                self.error(rel, lineno, link,
                           "an anchor needs a Markdown file")
            elif anchor not in self.anchors_of(target):
                self.error(rel, lineno, link,
                           "no heading with anchor #%s in %s" %
                           (anchor, os.path.relpath(target, self.root)))

    def check_mention(self, rel, lineno, name):
        page_dir = os.path.dirname(os.path.join(self.root, rel))
        for base in (page_dir, self.root):
            candidate = os.path.normpath(os.path.join(base, name))
            if self.inside(candidate) and os.path.isfile(candidate):
                return
        self.error(rel, lineno, name,
                   "names a Markdown file the repository does not have")

    def check_code_span(self, rel, lineno, span):
        span = span.strip()
        if not span.startswith("../"):
            return
        page_dir = os.path.dirname(os.path.join(self.root, rel))
        if not self.inside(os.path.join(page_dir, span.split()[0])):
            self.error(rel, lineno, span, "path leaves the repository")

    def check_file(self, rel):
        path = os.path.join(self.root, rel)
        in_fence = False
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for lineno, line in enumerate(lines, 1):
            if FENCE_RE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            for span in CODE_SPAN_RE.finditer(line):
                self.check_code_span(rel, lineno, span.group(2))
                for m in MD_MENTION_RE.finditer(span.group(2)):
                    self.check_mention(rel, lineno, m.group(1))
            text = CODE_SPAN_RE.sub(" ", line)
            m = REF_DEF_RE.match(text)
            if m:
                self.check_link(rel, lineno, m.group(1))
                continue
            for m in INLINE_LINK_RE.finditer(text):
                self.check_link(rel, lineno, m.group(1))
            rest = INLINE_LINK_RE.sub(" ", text)
            for m in AUTOLINK_RE.finditer(rest):
                self.check_link(rel, lineno, m.group(1))
            rest = AUTOLINK_RE.sub(" ", rest)
            for m in BARE_URL_RE.finditer(rest):
                self.check_link(rel, lineno, m.group(1).rstrip(".,;:"))
            for m in MD_MENTION_RE.finditer(rest):
                self.check_mention(rel, lineno, m.group(1))


def default_files(root):
    files = [f for f in DEFAULT_FILES if os.path.isfile(os.path.join(root, f))]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted("docs/" + f for f in os.listdir(docs)
                        if f.endswith(".md"))
    return files


def run(root, files):
    checker = Checker(root)
    for rel in files:
        checker.check_file(rel)
    return checker


SELF_TEST_PAGES = {
    "README.md": "# Top\n\nSee [guide](docs/guide.md#usage) and "
                 "[tool](scripts/tool.sh).\n"
                 "[gone](docs/missing.md) <https://example.com/x>\n"
                 "Read `../shared/spec/` and ARCHITECTURE.md.\n"
                 "```\n[in a fence](nowhere.md)\n```\n",
    "docs/guide.md": "# Guide\n\n## Usage\n\nBack to [top](../README.md#top), "
                     "[here](#usage), [bad anchor](../README.md#nope),\n"
                     "[out](../../etc/passwd), [abs](/etc/passwd), "
                     "[ok](https://github.com/kvcache-ai/Mooncake),\n"
                     "[not allowed](https://example.org/page) and "
                     "`guide.md`.\n",
    "scripts/tool.sh": "true\n",
}

SELF_TEST_EXPECTED = [
    "README.md:4: link 'docs/missing.md': no such file",
    "README.md:4: link 'https://example.com/x': README.md links to nothing",
    "README.md:5: link '../shared/spec/': path leaves the repository",
    "README.md:5: link 'ARCHITECTURE.md': names a Markdown file",
    "docs/guide.md:5: link '../README.md#nope': no heading with anchor #nope",
    "docs/guide.md:6: link '../../etc/passwd': leaves the repository",
    "docs/guide.md:6: link '/etc/passwd': absolute path leaves",
    "docs/guide.md:7: link 'https://example.org/page': external link not in",
]


def self_test():
    with tempfile.TemporaryDirectory() as scratch:
        root = os.path.join(scratch, "repo")
        for rel, text in SELF_TEST_PAGES.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)) or root,
                        exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        checker = run(root, ["README.md", "docs/guide.md"])
    missing = [e for e in SELF_TEST_EXPECTED
               if not any(err.startswith(e) for err in checker.errors)]
    extra = [err for err in checker.errors
             if not any(err.startswith(e) for e in SELF_TEST_EXPECTED)]
    for line in missing:
        print("self-test: not reported: " + line)
    for line in extra:
        print("self-test: reported wrongly: " + line)
    if missing or extra:
        return 1
    print("self-test: %d broken links reported, %d good ones accepted" %
          (len(SELF_TEST_EXPECTED), checker.links - 6))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    root = os.path.realpath(args.root)
    files = args.files or default_files(root)
    checker = run(root, files)
    for line in checker.errors:
        print(line)
    if checker.errors:
        print("check_links: %d broken links in %d files" %
              (len(checker.errors), len(files)))
        return 1
    print("check_links: %d links in %d files, all inside the repository "
          "and resolved" % (checker.links, len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
