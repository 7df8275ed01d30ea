#!/usr/bin/env python3
"""Checks real exchanges with sluiced against its OpenAPI document.

    check_responses.py OPENAPI.json EXCHANGES.json [--partial]

EXCHANGES.json is a list of {"method", "path" (the document's path template), "status",
"content_type", "body"} that tests/integration/openapi_test.cpp recorded from a running
sluiced. For each one, the document must describe that method on that path, that status
(or its 4XX/5XX range) and that media type, and a JSON body must be valid against the
response's schema (JSON Schema 2020-12, python3-jsonschema, with the document's $refs).
Every operation of the document must have been exercised (unless --partial). Prints each
problem; exit 1 if any.
"""
import json
import sys

import jsonschema


def main(doc_path, exchanges_path, partial=False):
    doc = json.load(open(doc_path))
    exchanges = json.load(open(exchanges_path))
    resolver = jsonschema.RefResolver("", doc)
    problems = []
    seen = set()
    for i, x in enumerate(exchanges):
        where = f'{x["method"].upper()} {x["path"]} -> {x["status"]}'
        op = doc["paths"].get(x["path"], {}).get(x["method"].lower())
        if op is None:
            # A method the path does not list: 405 with a problem body, as info.description says.
            if x["status"] == 405 and x["path"] in doc["paths"]:
                problem = {"$ref": "#/components/schemas/Problem"}
                validator = jsonschema.Draft202012Validator(problem, resolver=resolver)
                for err in validator.iter_errors(json.loads(x["body"])):
                    problems.append(f"{where}: {err.message} at {list(err.absolute_path)}")
                continue
            problems.append(f"{where}: the document has no such operation")
            continue
        seen.add((x["path"], x["method"].lower()))
        status = str(x["status"])
        responses = op["responses"]
        resp = responses.get(status) or responses.get(status[0] + "XX")
        if resp is None:
            problems.append(f"{where}: status not in the document ({', '.join(responses)})")
            continue
        if "$ref" in resp:
            resp = resolver.resolve(resp["$ref"])[1]
        content = resp.get("content")
        media = x["content_type"].split(";")[0].strip()
        if not content:
            if x["body"]:
                problems.append(f"{where}: a body the document does not describe")
            continue
        if media not in content:
            problems.append(f"{where}: media type {media!r} not in {sorted(content)}")
            continue
        schema = content[media].get("schema", {})
        if media.endswith("json"):
            try:
                body = json.loads(x["body"])
            except ValueError as e:
                problems.append(f"{where}: not JSON: {e}")
                continue
            validator = jsonschema.Draft202012Validator(schema, resolver=resolver)
            for err in validator.iter_errors(body):
                problems.append(f"{where}: {err.message} at {list(err.absolute_path)}")
    for path, item in doc["paths"].items():
        for method in item:
            if not partial and (path, method) not in seen:
                problems.append(f"{method.upper()} {path}: never exercised")
    for p in problems:
        print(p)
    print(f"{len(exchanges)} exchanges, {len(seen)} operations, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], "--partial" in sys.argv[3:]))
