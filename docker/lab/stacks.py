#!/usr/bin/env python3
"""The stack lab's fixture (stacks.json beside this script) for the shell
scripts that run the lab (docker/compose-test.sh, docker/run-all.sh):

  stacks.py hosts                  the stack hosts' names, one a line
  stacks.py templates CORPUS DEST  copies the corpus templates the known
                                   findings are found with (the fixture's
                                   "templates", relative to the corpus's
                                   http/ directory CORPUS) to DEST, keeping
                                   their layout
  stacks.py check HOST STATUS      reads a scan detail (JSON) on stdin and
                                   fails unless STATUS is completed and
                                   every known finding of HOST is in it;
                                   findings beyond them are listed
"""
import json
import os
import shutil
import sys

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stacks.json")


def main(argv):
    with open(FIXTURE, encoding="utf-8") as f:
        fixture = json.load(f)
    if argv[:1] == ["hosts"]:
        for h in fixture["hosts"]:
            print(h["host"])
        return 0
    if argv[:1] == ["templates"] and len(argv) == 3:
        corpus, dest = argv[1:]
        for part in fixture["templates"]:
            src, dst = os.path.join(corpus, part), os.path.join(dest, part)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(src):
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copy(src, dst)
        return 0
    if argv[:1] == ["check"] and len(argv) == 3:
        host, status = argv[1:]
        scan = json.load(sys.stdin)
        found = {
            "%s %s" % (v["template_id"], v["matched_at"])
            for v in scan["vulnerabilities"]
            if v["template_id"] != "http-probe"
        }
        known = next(h for h in fixture["hosts"] if h["host"] == host)["findings"]
        missing = sorted(set(known) - found)
        extra = sorted(found - set(known))
        print(
            "   %s: scan %s %s, %d known findings, %d missing; also found: %s"
            % (host, scan["id"], status, len(known), len(missing), ", ".join(extra) or "nothing")
        )
        for k in missing:
            print("     missing: " + k)
        return 0 if status == "completed" and not missing else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
