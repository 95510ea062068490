#!/usr/bin/env bash
# Offline checks of deploy/helm/baton. There is no helm CLI and no cluster here, so:
# Helm's Go SDK through helm-python-sdk (lint, render, schema), kubernetes-validate
# for the rendered objects, yamllint, and assertions on what Baton relies on.
# Claims stop at "lints, renders and schema-validates"; nothing is installed.
#
#   bash deploy/check-chart.sh
#   BATON_BIN=/var/tmp/baton-target/debug/baton bash deploy/check-chart.sh
#     (also loads the rendered engine config with the real binary)
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="${TMPDIR:-/tmp}"
venv="$tmp/baton-chart-venv"
out="$tmp/baton-chart-rendered"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# Pinned versions: the ones harness.md verified offline.
"$venv/bin/pip" install -q --disable-pip-version-check \
  helm-python-sdk==0.2.2 kubernetes-validate==1.37.0 yamllint==1.38.0

export PATH="$venv/bin:$PATH"
exec python -u - "$out" <<'PY'
import contextlib, os, shutil, subprocess, sys, yaml
import helm_python as helm

CHART = "deploy/helm/baton"
OUT = sys.argv[1]
SETS = {  # name -> values file (chart-testing's ci/ convention)
    "default": f"{CHART}/ci/default-values.yaml",
    "mcp-tasks": f"{CHART}/ci/mcp-tasks-values.yaml",
    "existing-secret": f"{CHART}/ci/existing-secret-values.yaml",
    "tls": f"{CHART}/ci/tls-values.yaml",
}
SEED = {"principalConcurrency": 20, "projectConcurrency": 40, "organizationConcurrency": 80,
        "backlog": 100, "retainedPayloadBytes": 1048576}
ENGINE_BOUNDS = {"mcp_tasks_principal_concurrency": 20, "mcp_tasks_project_concurrency": 40,
                 "mcp_tasks_organization_concurrency": 80, "mcp_tasks_backlog": 100,
                 "mcp_tasks_retained_payload_bytes": 1048576}
helm.disable_logging()
passed, failed = 0, []

def check(name, fn):
    global passed
    try:
        fn()
        passed += 1
        print(f"ok   {name}")
    except Exception as e:  # one failed check must not hide the others
        failed.append(name)
        print(f"FAIL {name}: {e}")

@contextlib.contextmanager
def go_logs_muted():
    """Helm's Go code logs the expected missing-secret messages straight to fd 2."""
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)

def load(path):
    with open(path) as f:
        return yaml.safe_load(f)

chart = helm.Chart.load(CHART)
rendered = {}  # set -> list of objects

def render(set_name):
    manifests = chart.render(load(SETS[set_name]), name="baton", namespace="baton")
    d = os.path.join(OUT, set_name)
    os.makedirs(d)
    objs = []
    for path, text in manifests.items():
        if not path.endswith(".yaml") or not text.strip():
            continue  # NOTES.txt, and templates that render nothing
        with open(os.path.join(d, os.path.basename(path)), "w") as f:
            f.write(text)
        objs += [o for o in yaml.safe_load_all(text) if o]
    rendered[set_name] = objs

def objects(set_name, kind):
    return [o for o in rendered[set_name] if o["kind"] == kind]

def engine_config(set_name):
    (cm,) = objects(set_name, "ConfigMap")
    return yaml.safe_load(cm["data"]["config.yaml"])

def deployment(set_name, component):
    return next(o for o in objects(set_name, "Deployment") if o["metadata"]["name"] == f"baton-{component}")

def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}

def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(cmd[:2])} exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}"

shutil.rmtree(OUT, ignore_errors=True)

# --- lint and render ------------------------------------------------------------
def lint(values=None):
    with go_logs_muted():
        report = helm.lint(CHART, values)
    assert report["errors"] == [], report["errors"]
    assert not [m for m in report["messages"] if m["severity"] >= 2], report["messages"]

check("lint: chart defaults", lint)
for name, path in SETS.items():
    check(f"lint: {name}", lambda p=path: lint(load(p)))
    check(f"render: {name}", lambda n=name: render(n))

def defaults_refuse_to_render():
    # No database URL or payload key: fail at install, not in a crash-looping pod.
    try:
        with go_logs_muted():
            chart.render({}, name="baton", namespace="baton")
    except helm.HelmRenderError as e:
        assert "secrets." in str(e), e
        return
    raise AssertionError("rendered without secrets")
check("render: bare defaults fail naming the missing secret", defaults_refuse_to_render)

# --- offline validators on the written manifests ---------------------------------
files = sorted(os.path.join(r, f) for r, _, fs in os.walk(OUT) for f in fs)
for k8s in ("1.27.0", "1.37.0"):  # the chart's kubeVersion floor, and the newest
    check(f"kubernetes-validate --strict -k {k8s}", lambda k=k8s: run("kubernetes-validate", "--strict", "--quiet", "-k", k, *files))
check("yamllint -d relaxed", lambda: run("yamllint", "-d", "relaxed", OUT, f"{CHART}/values.yaml", f"{CHART}/ci", "deploy/examples"))

# --- the chart's contract -----------------------------------------------------------
def workloads_are_hardened():
    for set_name, objs in rendered.items():
        deploys = objects(set_name, "Deployment")
        assert {d["metadata"]["name"] for d in deploys} == {"baton-gateway", "baton-coordinator", "baton-worker"}
        for o in deploys + objects(set_name, "Job"):
            spec = o["spec"]["template"]["spec"]
            assert spec["securityContext"]["runAsNonRoot"] is True, o["metadata"]["name"]
            for c in spec["containers"]:
                where = f"{set_name}/{o['metadata']['name']}/{c['name']}"
                assert c["resources"].get("requests"), f"{where}: no resources"
                assert c["securityContext"]["readOnlyRootFilesystem"] is True, where
                assert c["image"] == "ghcr.io/baton/baton:0.1.0", where
                if o["kind"] == "Deployment":
                    assert c.get("readinessProbe") and c.get("livenessProbe"), f"{where}: no probes"
check("every Deployment/Job: resources, probes, non-root, read-only root fs", workloads_are_hardened)

def one_image_three_commands():
    for component in ("gateway", "coordinator", "worker"):
        (c,) = deployment("default", component)["spec"]["template"]["spec"]["containers"]
        assert c["args"][:3] == [component, "--config", "/etc/baton/config.yaml"], c["args"]
    assert "--examples" in deployment("default", "worker")["spec"]["template"]["spec"]["containers"][0]["args"]
check("one image, role commands", one_image_three_commands)

def probes():
    gw = deployment("default", "gateway")["spec"]["template"]["spec"]["containers"][0]
    assert gw["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gw["livenessProbe"]["httpGet"]["path"] == "/livez"
    co = deployment("default", "coordinator")["spec"]["template"]["spec"]["containers"][0]
    assert co["readinessProbe"]["grpc"]["port"] == 7070 and co["livenessProbe"]["grpc"]["port"] == 7070
check("probes: gateway /readyz /livez, coordinator gRPC health", probes)

def mcp_tasks_block():
    f = engine_config("mcp-tasks")["features"]
    assert f["native_mcp_tasks"] is True and f["mcp_tasks_compatibility"] is True, f
    for k, v in ENGINE_BOUNDS.items():
        assert f.get(k) == v and type(f[k]) is int, f"{k}: {f.get(k)!r}"
check("seed mcpTasks block renders the five engine bounds", mcp_tasks_block)

def surfaces_off_by_default():
    f = engine_config("default")["features"]
    assert f == {"native_mcp_tasks": False, "mcp_tasks_compatibility": False}, f
check("both surfaces off by default, no bounds rendered", surfaces_off_by_default)

def schema():
    on = {"nativeEnabled": True, **SEED}
    chart.validate_schema({"features": {"mcpTasks": on}})
    for bad in ({**on, "backlog": 0},
                {"compatibilityEnabled": True, **SEED, "backlog": 0},
                {"compatibilityEnabled": True},  # bounds missing
                {"nativeEnabled": True, **SEED, "backlog": "100"},
                {"nativeEnabled": True, **SEED, "nativeTasks": True}):  # unknown key
        try:
            chart.validate_schema({"features": {"mcpTasks": bad}})
        except helm.HelmValuesError:
            continue
        raise AssertionError(f"schema accepted {bad}")
check("schema: enabling a surface needs five positive bounds", schema)

def cluster_wiring():
    cfg = engine_config("default")
    assert cfg["coordinator"]["listen"] == "0.0.0.0:7070"
    services = {s["metadata"]["name"]: s for s in objects("default", "Service")}
    assert cfg["gateway"]["coordinator_url"] == cfg["worker"]["coordinator_url"] == "http://baton-coordinator:7070"
    assert services["baton-coordinator"]["spec"]["ports"][0]["port"] == 7070
    env = env_of(deployment("default", "coordinator")["spec"]["template"]["spec"]["containers"][0])
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["BATON_COORDINATOR__ADVERTISE_URL"]["value"] == "http://$(POD_IP):7070"
    names = list(env)
    assert names.index("POD_IP") < names.index("BATON_COORDINATOR__ADVERTISE_URL"), "$(POD_IP) must be defined first"
check("coordinator advertises its pod IP; gateway/worker use the Service", cluster_wiring)

def secrets_wiring():
    (secret,) = [s for s in objects("mcp-tasks", "Secret") if "helm.sh/hook" not in s["metadata"].get("annotations", {})]
    keys = yaml.safe_load(secret["stringData"]["execution-payload-keys"])
    assert keys and all(set(k) == {"id", "key"} for k in keys), keys
    wanted = {"coordinator": {"BATON_DATABASE__URL", "BATON_REDIS__URL", "BATON_SECURITY__EXECUTION_PAYLOAD_KEYS"},
              "gateway": {"BATON_SECURITY__MCP_SESSION_KEY"}, "worker": {"BATON_WORKER__TOKEN"}}
    for set_name, secret_name in (("mcp-tasks", "baton"), ("existing-secret", "baton-prod")):
        for component, names in wanted.items():
            env = env_of(deployment(set_name, component)["spec"]["template"]["spec"]["containers"][0])
            for n in names:
                ref = env[n]["valueFrom"]["secretKeyRef"]
                assert ref["name"] == secret_name and ref["key"] in secret["stringData"], f"{set_name}/{component}/{n}"
    assert not objects("existing-secret", "Secret"), "existingSecret must not render a Secret"
check("secrets reach the pods as BATON_* env vars (own and existing Secret)", secrets_wiring)

def migration_hook():
    for set_name, secret_name in (("default", "baton-migrate"), ("existing-secret", "baton-prod")):
        (job,) = objects(set_name, "Job")
        ann = job["metadata"]["annotations"]
        assert ann["helm.sh/hook"] == "pre-install,pre-upgrade", ann
        (c,) = job["spec"]["template"]["spec"]["containers"]
        assert c["args"] == ["migrate"], c["args"]
        assert env_of(c)["BATON_DATABASE__URL"]["valueFrom"]["secretKeyRef"]["name"] == secret_name
    hook_secret = next(s for s in objects("default", "Secret") if s["metadata"]["name"] == "baton-migrate")
    assert int(hook_secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(ann["helm.sh/hook-weight"])
check("migration Job is a pre-install/pre-upgrade hook with its own DB secret", migration_hook)

def scaling():
    assert {h["spec"]["scaleTargetRef"]["name"] for h in objects("default", "HorizontalPodAutoscaler")} == {"baton-gateway", "baton-worker"}
    assert "replicas" not in deployment("default", "gateway")["spec"], "HPA owns the replica count"
    assert len(objects("default", "PodDisruptionBudget")) == 3
    assert not objects("existing-secret", "HorizontalPodAutoscaler")
    for component, n in (("gateway", 3), ("coordinator", 3), ("worker", 4)):
        assert deployment("existing-secret", component)["spec"]["replicas"] == n, component
    cfg = engine_config("existing-secret")
    assert cfg["executions"]["lease_ms"] == 20000 and cfg["gateway"]["allowed_hosts"] == ["baton.example.com"]
    assert cfg["gateway"]["listen"] == "0.0.0.0:8080", "config merge must keep the chart's keys"
check("HPAs, PDBs, fixed replicas, extra config merge", scaling)

def worker_drain():
    cfg = engine_config("default")
    assert cfg["worker"]["drain_timeout_ms"] == 30000, cfg["worker"]
    spec = deployment("default", "worker")["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 40, spec.get("terminationGracePeriodSeconds")
check("worker drain: drain_timeout_ms configured, grace period derived from it", worker_drain)

def tls_off_by_default():
    for set_name in ("default", "mcp-tasks", "existing-secret"):
        for component in ("gateway", "coordinator", "worker"):
            spec = deployment(set_name, component)["spec"]["template"]["spec"]
            names = env_of(spec["containers"][0])
            assert not [n for n in names if n.startswith("BATON_TLS__")], f"{set_name}/{component}: {names}"
            assert not [v for v in spec["volumes"] if v["name"].startswith("tls-")], f"{set_name}/{component}"
check("TLS off by default: no BATON_TLS__ env, no certificate volumes", tls_off_by_default)

def tls_wiring():
    cfg = engine_config("tls")
    url = "https://baton-coordinator:7070"
    assert cfg["gateway"]["coordinator_url"] == cfg["worker"]["coordinator_url"] == url, cfg
    own = {"coordinator": "baton-coordinator-tls", "gateway": "baton-client-tls", "worker": "baton-client-tls"}
    for component, secret in own.items():
        spec = deployment("tls", component)["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        env = env_of(c)
        files = {n: env[n]["value"] for n in ("BATON_TLS__CA_FILE", "BATON_TLS__CERT_FILE", "BATON_TLS__KEY_FILE")}
        assert env["BATON_TLS__SERVER_NAME"]["value"] == "baton-coordinator", env["BATON_TLS__SERVER_NAME"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["tls-own"]["secret"]["secretName"] == secret, volumes["tls-own"]
        assert volumes["tls-ca"]["secret"]["secretName"] == "baton-ca", volumes["tls-ca"]
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        for name, path in files.items():  # every named file is inside a mounted Secret, under its key
            vol = "tls-ca" if name.endswith("CA_FILE") else "tls-own"
            directory, _, file = path.rpartition("/")
            assert mounts[vol]["mountPath"] == directory and mounts[vol]["readOnly"] is True, (name, mounts[vol])
            assert file in {i["path"] for i in volumes[vol]["secret"]["items"]}, (name, volumes[vol])
        if component == "coordinator":
            assert env["BATON_TLS__CLIENT_CA_FILE"]["value"] == files["BATON_TLS__CA_FILE"]
            assert env["BATON_TLS__REQUIRE_CLIENT_CERT"]["value"] == "true"
            assert env["BATON_COORDINATOR__ADVERTISE_URL"]["value"] == "https://$(POD_IP):7070"
            for probe in ("readinessProbe", "livenessProbe"):  # kubelet gRPC probes cannot speak TLS
                assert "grpc" not in c[probe] and c[probe]["tcpSocket"]["port"] == "grpc", c[probe]
        else:
            assert "BATON_TLS__CLIENT_CA_FILE" not in env and "BATON_TLS__REQUIRE_CLIENT_CERT" not in env, component
    (job,) = objects("tls", "Job")
    (m,) = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert m["mountPath"] == "/etc/baton-tls/ca", m
check("tls: https URLs, certificates mounted from Secrets and named by BATON_TLS__*, TCP probes", tls_wiring)

def cluster_secret_wiring():
    (secret,) = [s for s in objects("tls", "Secret") if "helm.sh/hook" not in s["metadata"].get("annotations", {})]
    assert len(secret["stringData"]["cluster-secret"]) >= 32
    for set_name, secret_name in (("tls", "baton"), ("existing-secret", "baton-prod")):
        env = env_of(deployment(set_name, "coordinator")["spec"]["template"]["spec"]["containers"][0])
        ref = env["BATON_SECURITY__CLUSTER_SECRET"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret_name, "key": "cluster-secret", "optional": True}, ref
        for component in ("gateway", "worker"):
            other = env_of(deployment(set_name, component)["spec"]["template"]["spec"]["containers"][0])
            assert "BATON_SECURITY__CLUSTER_SECRET" not in other, f"{set_name}/{component}"
    assert "cluster-secret" not in next(s for s in objects("default", "Secret") if s["metadata"]["name"] == "baton")["stringData"]
check("security.cluster_secret reaches coordinators only, from the Secret", cluster_secret_wiring)

def tls_values_are_checked():
    base = load(SETS["tls"])
    def refused(values, needle):
        try:
            with go_logs_muted():
                chart.render(values, name="baton", namespace="baton")
        except (helm.HelmRenderError, helm.HelmValuesError) as e:
            assert needle in str(e), e
            return
        raise AssertionError(f"rendered without {needle}")
    refused({**base, "tls": {**base["tls"], "clientSecret": ""}}, "tls.clientSecret")
    refused({**base, "tls": {**base["tls"], "coordinatorSecret": ""}}, "coordinatorSecret")
    refused({**base, "secrets": {**base["secrets"], "clusterSecret": "short"}}, "clusterSecret")
    # Without client certificates gateways and workers need no Secret of their own.
    values = {**base, "tls": {**base["tls"], "clientAuth": "none", "clientSecret": ""}}
    manifests = chart.render(values, name="baton", namespace="baton")
    objs = [o for p, t in manifests.items() if p.endswith(".yaml") for o in yaml.safe_load_all(t) if o]
    gw = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "baton-gateway")
    assert [v["name"] for v in gw["spec"]["template"]["spec"]["volumes"]] == ["config", "tls-ca"]
    co = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "baton-coordinator")
    assert "BATON_TLS__CLIENT_CA_FILE" not in env_of(co["spec"]["template"]["spec"]["containers"][0])
check("tls: a missing Secret or a short cluster secret fails at install; clientAuth none needs no client Secret", tls_values_are_checked)

# --- optional: the real binary accepts the rendered config and the examples -------
binary = os.environ.get("BATON_BIN")
ROLES = (("coordinator", "--listen", "127.0.0.1:0"), ("gateway", "--listen", "127.0.0.1:0"), ("worker", "--examples"))

def accepts(role, config, extra, env=None):
    # A config error exits 64 before any connection; otherwise the role starts (and
    # fails to reach the fake database, or is still running when the timeout kills it).
    try:
        p = subprocess.run([binary, role, "--config", config, *extra], env=env, capture_output=True, text=True, timeout=2)
        code, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        code, err = None, (e.stderr or b"").decode()
    assert code != 64 and "invalid configuration" not in err, f"{config} ({role}): {err[-500:]}"

def engine_accepts_rendered_config():
    secret = next(s["stringData"] for s in objects("mcp-tasks", "Secret") if s["metadata"]["name"] == "baton")
    env = {**os.environ,  # what the pods get from the Secret and the downward API
           "BATON_DATABASE__URL": "postgres://baton:baton@127.0.0.1:1/baton",
           "BATON_SECURITY__EXECUTION_PAYLOAD_KEYS": secret["execution-payload-keys"],
           "BATON_SECURITY__MCP_SESSION_KEY": secret["mcp-session-key"],
           "BATON_WORKER__TOKEN": secret["worker-token"],
           "BATON_COORDINATOR__ADVERTISE_URL": "http://10.0.0.7:7070",
           "BATON_WORKER__METRICS_LISTEN": "127.0.0.1:0"}
    for set_name in SETS:
        path = os.path.join(OUT, f"{set_name}.engine.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(engine_config(set_name), f)
        for role, *extra in ROLES:
            accepts(role, path, extra, env)
    for role, *extra in ROLES:
        accepts(role, f"deploy/examples/{role}.yaml", extra)

if binary:
    check("the baton binary loads each rendered config and deploy/examples (exit != 64)", engine_accepts_rendered_config)

print(f"chart checks: {passed} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
PY
