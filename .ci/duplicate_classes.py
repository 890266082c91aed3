"""Fails when a client generated from openapi/openapi.json has two classes of
one shape (issue 37, item 9): two enums with the same values (an enum
stated inline in two places: `FindingUpdateStatus` and
`ListTargetFindingsStatus`), or a model the generator made up with the
fields of another (the second class of a nullable reference:
`ScanDetailChangesType1` beside `ScanChanges`). Two schemas the contract
names itself may share fields (`LogoutRequest` and `RefreshRequest` are two
operations' bodies): they are listed, not refused. Free-form maps (no
fields) are not compared.

Usage: duplicate_classes.py PACKAGE_DIR OPENAPI_JSON (the generated
package, e.g. .../scanfleet_client, and the contract it was generated
from); exits non-zero listing each group of duplicates."""

import enum
import importlib
import inspect
import json
import pathlib
import sys

import attrs


def shapes(package_dir):
    package_dir = pathlib.Path(package_dir).resolve()
    sys.path.insert(0, str(package_dir.parent))
    models = importlib.import_module(f"{package_dir.name}.models")
    seen = {}
    for name, cls in inspect.getmembers(models, inspect.isclass):
        if not cls.__module__.startswith(f"{package_dir.name}.models"):
            continue
        if issubclass(cls, enum.Enum):
            shape = ("enum", frozenset(m.value for m in cls))
        elif attrs.has(cls):
            fields = frozenset(
                (f.name, str(f.type)) for f in attrs.fields(cls) if f.name != "additional_properties"
            )
            if not fields:
                continue
            shape = ("model", fields)
        else:
            continue
        seen.setdefault(shape, []).append(name)
    return seen


def main(package_dir, contract):
    with open(contract) as f:
        named = set(json.load(f)["components"]["schemas"])
    failed = 0
    for (kind, _), names in sorted(shapes(package_dir).items(), key=lambda kv: sorted(kv[1])):
        if len(names) < 2:
            continue
        names = sorted(names)
        if kind == "model" and all(n in named for n in names):
            print("note: contract schemas with the same fields: " + ", ".join(names))
            continue
        failed += 1
        print(f"one shape, several classes ({kind}): " + ", ".join(names))
    if failed:
        sys.exit(f"{failed} shape(s) generated more than once; see above")
    print("one class per shape")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
