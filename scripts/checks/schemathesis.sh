#!/usr/bin/env bash
# Fuzzes the REST API from its own OpenAPI document with schemathesis against a
# real `baton dev`: no 5xx, every response conforms to the document. The
# document's org_id/project_id parameters, and the start request's gateway, user,
# tool and input, are pinned to the dev project and Demo.Echo, so the fuzzer
# reaches the handlers and creates real executions instead of bouncing off 4xx.
# One worker: schemathesis' coverage phase trips a CPython 3.11 `ast` bug when
# run on several threads. The execution history and the operator routes refuse
# end users, so two more runs cover them: the history with an admin key, the
# operator routes with the dev operator key.
#
# positive_data_acceptance is excluded knowingly: schema-valid start requests
# naming a gateway or tool that does not exist are correctly refused (4xx).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools="${BATON_TOOLS_DIR:-$HOME/.cache/baton-tools}"
venv="$tools/venv-st"
[ -x "$venv/bin/schemathesis" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==4.32.5"; }
bin="${CARGO_TARGET_DIR:-target}/debug/baton"
work=$(mktemp -d)
"$bin" dev --data-dir "$work/data" --listen 127.0.0.1:0 >"$work/dev.log" 2>&1 &
dev=$!
trap 'kill $dev 2>/dev/null; wait $dev 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -s "$work/data/dev.json" ] && break; sleep 0.1; done
[ -s "$work/data/dev.json" ] || { cat "$work/dev.log"; exit 1; }
http=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['http_url'])" "$work/data/dev.json")
for _ in $(seq 100); do curl -sf "$http/readyz" >/dev/null && break; sleep 0.1; done
python3 - "$work/data/dev.json" "$http" "$work/openapi.json" <<'PY'
import json, sys, urllib.request
dev = json.load(open(sys.argv[1]))
doc = json.load(urllib.request.urlopen(sys.argv[2] + "/v1/openapi.json"))
for item in doc["paths"].values():
    for p in item.get("parameters", []):
        if p["name"] in ("org_id", "project_id"):
            p["schema"] = {"type": "string", "enum": [dev[p["name"]]]}
start = doc["components"]["schemas"]["StartRequest"]["properties"]
start["gateway_id"] = {"enum": [dev["gateway_id"]]}
start["user_id"] = {"enum": [dev["credentials"]["end_user"]["user_id"], None]}
start["tool_name"] = {"enum": ["Demo.Echo"]}
start["input"] = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False}
doc["components"]["schemas"]["StartRequest"]["required"] += ["input"]
json.dump(doc, open(sys.argv[3], "w"))
PY
credential() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['credentials'][sys.argv[2]])" "$work/data/dev.json" "$1"; }
token=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['credentials']['end_user']['token'])" "$work/data/dev.json")
"$venv/bin/schemathesis" run "$work/openapi.json" --url "$http" \
  -H "Authorization: Bearer $token" \
  --exclude-path-regex 'tool_executions|/operator/' \
  --checks all --exclude-checks positive_data_acceptance \
  --max-examples 60 --seed 1 --workers 1 --no-color
# The execution history refuses end users (tests/it/history.rs); an admin key reaches its
# handlers, its SQLite queries and the payload flags. Its detail route's ids are
# pinned to runs the first pass created (and one unknown id), as are the
# operator routes' below.
admin_key=$(credential admin_key)
python3 - "$work/openapi.json" "$http" "$work/openapi-history.json" "$admin_key" "$work/data/dev.json" <<'PY'
import json, sys, urllib.request
doc, dev = json.load(open(sys.argv[1])), json.load(open(sys.argv[5]))
url = f"{sys.argv[2]}/v1/orgs/{dev['org_id']}/projects/{dev['project_id']}/tool_executions?limit=20"
page = json.load(urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + sys.argv[4]})))
ids = [i["id"] for i in page["items"]] + ["te_000000000000000000000000000"]
for path, item in doc["paths"].items():
    if "tool_executions/{execution_id}" in path or "operator/tool-executions/{execution_id}" in path:
        for p in item.get("parameters", []):
            if p["name"] == "execution_id":
                p["schema"] = {"type": "string", "enum": ids}
json.dump(doc, open(sys.argv[3], "w"))
PY
"$venv/bin/schemathesis" run "$work/openapi-history.json" --url "$http" \
  -H "Authorization: Bearer $admin_key" \
  --include-path-regex 'tool_executions' \
  --checks all --exclude-checks positive_data_acceptance \
  --max-examples 60 --seed 1 --workers 1 --no-color
# The operator routes with the dev operator key (status, payload and cancel).
"$venv/bin/schemathesis" run "$work/openapi-history.json" --url "$http" \
  -H "Authorization: Bearer $(credential operator_key)" \
  --include-path-regex '/operator/' \
  --checks all --exclude-checks positive_data_acceptance \
  --max-examples 60 --seed 1 --workers 1 --no-color
