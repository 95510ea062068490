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
    "operations": f"{CHART}/ci/operations-values.yaml",
    "redis-cluster": f"{CHART}/ci/redis-cluster-values.yaml",
}
# Kinds from CRDs (prometheus-operator, Gateway API): kubernetes-validate has no
# schema for them, so the assertions below check them instead.
CRD_KINDS = {"PodMonitor", "HTTPRoute"}
# The metric names the dashboard may use: what the roles export.
METRICS = {"http_server_request_duration_seconds", "rpc_server_duration_seconds", "baton_executions_started_total",
           "baton_executions_finished_total", "baton_pending_backlog", "baton_execution_start_latency_seconds",
           "baton_execution_run_seconds", "baton_admission_rejections_total", "baton_owner_lost_total",
           "baton_worker_sessions", "baton_worker_free_slots", "baton_db_pool_connections",
           "baton_lease_lapses_total", "mcp_server_operation_duration_seconds"}
DASHBOARD = "deploy/grafana/baton.json"
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
validated = []  # written files holding no CRD kinds

def render(set_name):
    manifests = chart.render(load(SETS[set_name]), name="baton", namespace="baton")
    d = os.path.join(OUT, set_name)
    os.makedirs(d)
    objs = []
    for path, text in manifests.items():
        if not path.endswith(".yaml") or not text.strip():
            continue  # NOTES.txt, and templates that render nothing
        file = os.path.join(d, os.path.basename(path))
        with open(file, "w") as f:
            f.write(text)
        these = [o for o in yaml.safe_load_all(text) if o]
        if not any(o["kind"] in CRD_KINDS for o in these):
            validated.append(file)
        objs += these
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

def values(set_name):
    return load(SETS[set_name])

def refused(values, needle):
    """Rendering `values` fails (template or schema) with a message containing `needle`."""
    try:
        with go_logs_muted():
            chart.render(values, name="baton", namespace="baton")
    except (helm.HelmRenderError, helm.HelmValuesError) as e:
        assert needle in str(e), e
        return
    raise AssertionError(f"rendered without {needle}")

def render_objects(values):
    manifests = chart.render(values, name="baton", namespace="baton")
    return [o for p, t in manifests.items() if p.endswith(".yaml") for o in yaml.safe_load_all(t) if o]

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
            chart.render({"worker": {"examples": True}}, name="baton", namespace="baton")
    except (helm.HelmRenderError, helm.HelmValuesError) as e:
        assert "secrets." in str(e), e
        return
    raise AssertionError("rendered without secrets")
check("render: defaults (with tools) fail naming the missing secret", defaults_refuse_to_render)

# --- offline validators on the written manifests ---------------------------------
files = sorted(validated)
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
                if set_name != "operations":
                    assert c["image"] == "ghcr.io/baton/baton:0.1.0", where
                if o["kind"] == "Deployment":
                    assert c.get("readinessProbe") and c.get("livenessProbe"), f"{where}: no probes"
                    assert c.get("startupProbe"), f"{where}: no startupProbe"
                    assert spec.get("topologySpreadConstraints"), f"{where}: no topology spread"
check("every Deployment/Job: resources, probes (startup too), spread, non-root, read-only root fs", workloads_are_hardened)

def role_commands_and_demo_tools_off():
    for component in ("gateway", "coordinator", "worker"):
        (c,) = deployment("default", component)["spec"]["template"]["spec"]["containers"]
        assert c["args"][:3] == [component, "--config", "/etc/baton/config.yaml"], c["args"]
    default_worker = deployment("default", "worker")["spec"]["template"]["spec"]["containers"][0]
    assert "--examples" not in default_worker["args"], default_worker["args"]
    assert engine_config("default")["worker"]["remote_servers"] == [{"url": "http://tools-mcp:8000/mcp"}]
    assert "--examples" in deployment("mcp-tasks", "worker")["spec"]["template"]["spec"]["containers"][0]["args"]
    # A worker with nothing to serve would crash-loop: refused at install, naming the choices.
    bare = {**values("default"), "worker": {}}
    refused(bare, "worker.remoteServers")
    # Unless the list comes from a Secret through extraEnv, or the workers are not the chart's.
    from_secret = {"name": "BATON_WORKER__REMOTE_SERVERS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    render_objects({**values("default"), "worker": {"extraEnv": [from_secret]}})
    objs = render_objects({**values("default"), "worker": {"enabled": False}})
    assert not [o for o in objs if o["metadata"]["name"] == "baton-worker"], "worker.enabled=false renders no worker objects"
check("role commands; demo tools only when asked; a worker needs tools", role_commands_and_demo_tools_off)

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
    key = {"secrets": {"mcpSessionKey": "k"}}  # the default gateways autoscale past one
    chart.validate_schema({"features": {"mcpTasks": on}, **key})
    for bad in ({**on, "backlog": 0},
                {"compatibilityEnabled": True, **SEED, "backlog": 0},
                {"compatibilityEnabled": True},  # bounds missing
                {"nativeEnabled": True, **SEED, "backlog": "100"},
                {"nativeEnabled": True, **SEED, "nativeTasks": True}):  # unknown key
        try:
            chart.validate_schema({"features": {"mcpTasks": bad}, **key})
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
        lock_wait = env_of(c).get("BATON_DATABASE__MIGRATIONS__LOCK_TIMEOUT_MS", {}).get("value")
        assert lock_wait == ("3000" if set_name == "existing-secret" else None), (set_name, lock_wait)
    hook_secret = next(s for s in objects("default", "Secret") if s["metadata"]["name"] == "baton-migrate")
    assert int(hook_secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(ann["helm.sh/hook-weight"])
check("migration Job is a pre-install/pre-upgrade hook with its own DB secret and its own extraEnv", migration_hook)

def scaling():
    # One gateway and one coordinator by default (more need shared secrets); workers autoscale.
    assert {h["spec"]["scaleTargetRef"]["name"] for h in objects("default", "HorizontalPodAutoscaler")} == {"baton-worker"}
    assert deployment("default", "gateway")["spec"]["replicas"] == deployment("default", "coordinator")["spec"]["replicas"] == 1
    assert {h["spec"]["scaleTargetRef"]["name"] for h in objects("operations", "HorizontalPodAutoscaler")} == {"baton-gateway", "baton-worker"}
    assert "replicas" not in deployment("operations", "gateway")["spec"], "HPA owns the replica count"
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
    # Optional with one coordinator; needed (the pod waits for the key) with more.
    for set_name, secret_name, optional in (("tls", "baton", True), ("existing-secret", "baton-prod", False)):
        env = env_of(deployment(set_name, "coordinator")["spec"]["template"]["spec"]["containers"][0])
        ref = env["BATON_SECURITY__CLUSTER_SECRET"]["valueFrom"]["secretKeyRef"]
        want = {"name": secret_name, "key": "cluster-secret", **({"optional": True} if optional else {})}
        assert ref == want, ref
        for component in ("gateway", "worker"):
            other = env_of(deployment(set_name, component)["spec"]["template"]["spec"]["containers"][0])
            assert "BATON_SECURITY__CLUSTER_SECRET" not in other, f"{set_name}/{component}"
    assert "cluster-secret" not in next(s for s in objects("default", "Secret") if s["metadata"]["name"] == "baton")["stringData"]
check("security.cluster_secret reaches coordinators only, from the Secret", cluster_secret_wiring)

def tls_values_are_checked():
    base = load(SETS["tls"])
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

# --- day-1 operations: images, env, exposure, metrics, drain, spread, schema ------
def schema_rules():
    def refuses(v, needle):
        try:
            chart.validate_schema(v)
        except helm.HelmValuesError as e:
            assert needle in str(e), e
            return
        raise AssertionError(f"schema accepted {v}")
    two_fixed = {"replicas": 2, "autoscaling": {"enabled": False}}
    refuses({"gateway": two_fixed}, "mcpSessionKey")
    refuses({"gateway": {"autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 2}}}, "mcpSessionKey")
    chart.validate_schema({"gateway": {"replicas": 1, "autoscaling": {"enabled": False}}})
    chart.validate_schema({"gateway": {"autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 1}}})
    chart.validate_schema({"gateway": two_fixed, "secrets": {"mcpSessionKey": "k"}})
    chart.validate_schema({"gateway": two_fixed, "secrets": {"existingSecret": "mine"}})
    one_gateway = {"gateway": {"replicas": 1, "autoscaling": {"enabled": False}}}
    refuses({**one_gateway, "coordinator": {"replicas": 2}}, "redisUrl")
    refuses({**one_gateway, "coordinator": {"replicas": 2}, "secrets": {"redisUrl": "redis://r"}}, "clusterSecret")
    chart.validate_schema({**one_gateway, "coordinator": {"replicas": 2},
                           "secrets": {"redisUrl": "redis://r", "clusterSecret": "c" * 32}})
    chart.validate_schema({**one_gateway, "coordinator": {"replicas": 3}, "secrets": {"existingSecret": "mine"}})
    refuses({**one_gateway, "metrics": {"podMonitor": {"enabled": True}}}, "/metrics/enabled")
    refuses({**one_gateway, "gateway": {**one_gateway["gateway"], "allowedHost": ["x"]}}, "allowedHost")
    refuses({**one_gateway, "gateway": {**one_gateway["gateway"], "allowedHosts": ["https://x.example"]}}, "allowedHosts")
    refuses({**one_gateway, "worker": {"image": {"repo": "x"}}}, "repo")
check("schema: >1 gateway needs mcpSessionKey, >1 coordinator needs Redis and the cluster secret; typos refused", schema_rules)

def needed_keys_of_an_existing_secret():
    # 3 gateways and 3 coordinators: a Secret lacking a needed key keeps the pods from starting.
    for component, names in (("gateway", ["BATON_SECURITY__MCP_SESSION_KEY"]),
                             ("coordinator", ["BATON_REDIS__URL", "BATON_SECURITY__CLUSTER_SECRET"])):
        env = env_of(deployment("existing-secret", component)["spec"]["template"]["spec"]["containers"][0])
        for n in names:
            assert "optional" not in env[n]["valueFrom"]["secretKeyRef"], f"{component}/{n}"
    env = env_of(deployment("tls", "coordinator")["spec"]["template"]["spec"]["containers"][0])
    assert env["BATON_REDIS__URL"]["valueFrom"]["secretKeyRef"]["optional"] is True, "one coordinator: Redis optional"
check("existing Secret: keys needed by the replica counts are not optional", needed_keys_of_an_existing_secret)

def redis_cluster_wiring():
    env = env_of(deployment("redis-cluster", "coordinator")["spec"]["template"]["spec"]["containers"][0])
    assert "BATON_REDIS__URL" not in env, "cluster_nodes and url together are a config error"
    ref = env["BATON_REDIS__CLUSTER_NODES"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "baton", "key": "redis-cluster-nodes"}, ref  # 3 coordinators: not optional
    (secret,) = [s for s in objects("redis-cluster", "Secret") if "helm.sh/hook" not in s["metadata"].get("annotations", {})]
    assert "redis-url" not in secret["stringData"], secret["stringData"].keys()
    # The env value is YAML to the engine: the JSON string must parse to the seed list.
    seeds = yaml.safe_load(secret["stringData"]["redis-cluster-nodes"])
    assert seeds == values("redis-cluster")["secrets"]["redisClusterNodes"] and len(seeds) == 3, seeds
    one = {**values("redis-cluster"), "coordinator": {"replicas": 1}}
    co = next(o for o in render_objects(one) if o["kind"] == "Deployment" and o["metadata"]["name"] == "baton-coordinator")
    ref = env_of(co["spec"]["template"]["spec"]["containers"][0])["BATON_REDIS__CLUSTER_NODES"]["valueFrom"]["secretKeyRef"]
    assert ref.get("optional") is True, "one coordinator: Redis optional"
check("redis cluster: seeds from the Secret as BATON_REDIS__CLUSTER_NODES (a JSON list), no BATON_REDIS__URL", redis_cluster_wiring)

def redis_cluster_schema():
    base = values("redis-cluster")
    refused({**base, "secrets": {**base["secrets"], "redisUrl": "redis://redis:6379"}}, "'not' failed")
    refused({**base, "secrets": {**base["secrets"], "redisClusterNodes": ["redis-0:6379"]}}, "redisClusterNodes")
    two = {"gateway": {"replicas": 1, "autoscaling": {"enabled": False}}, "coordinator": {"replicas": 2}}
    chart.validate_schema({**two, "secrets": {"redisClusterNodes": ["rediss://r:6380/"], "clusterSecret": "c" * 32}})
    refused({**base, "coordinator": {"replicas": 2}, "secrets": {**base["secrets"], "clusterSecret": ""}}, "clusterSecret")
check("schema: redisUrl or redisClusterNodes, never both; seeds are redis:// URLs; >1 coordinator accepts seeds", redis_cluster_schema)

def redis_cluster_existing_secret():
    objs = render_objects({**values("existing-secret"), "redis": {"cluster": True}})
    co = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "baton-coordinator")
    env = env_of(co["spec"]["template"]["spec"]["containers"][0])
    assert "BATON_REDIS__URL" not in env, list(env)
    ref = env["BATON_REDIS__CLUSTER_NODES"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "baton-prod", "key": "redis-cluster-nodes"}, ref
    # The chart's own Secret cannot hold seeds it was not given.
    refused({**values("default"), "redis": {"cluster": True}}, "redis.cluster")
check("existing Secret with redis.cluster: coordinators read its redis-cluster-nodes key", redis_cluster_existing_secret)

REPLICA_ENV = "BATON_DATABASE__READ_REPLICA_URL"

def read_replica_wiring():
    # Coordinators only, always optional: a Secret without the key means no replica.
    for set_name, secret_name in (("redis-cluster", "baton"), ("default", "baton"), ("existing-secret", "baton-prod")):
        env = env_of(deployment(set_name, "coordinator")["spec"]["template"]["spec"]["containers"][0])
        ref = env[REPLICA_ENV]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret_name, "key": "read-replica-url", "optional": True}, (set_name, ref)
        for component in ("gateway", "worker"):
            other = env_of(deployment(set_name, component)["spec"]["template"]["spec"]["containers"][0])
            assert REPLICA_ENV not in other, f"{set_name}/{component}"
        (job,) = objects(set_name, "Job")
        assert REPLICA_ENV not in env_of(job["spec"]["template"]["spec"]["containers"][0]), f"{set_name}/migrate"
    (secret,) = [s for s in objects("redis-cluster", "Secret") if "helm.sh/hook" not in s["metadata"].get("annotations", {})]
    assert secret["stringData"]["read-replica-url"] == values("redis-cluster")["secrets"]["readReplicaUrl"]
    hook = next(s for s in objects("redis-cluster", "Secret") if s["metadata"]["name"] == "baton-migrate")
    assert set(hook["stringData"]) == {"database-url"}, hook["stringData"].keys()
    default_secret = next(s for s in objects("default", "Secret") if s["metadata"]["name"] == "baton")
    assert "read-replica-url" not in default_secret["stringData"]
    # The bound is config; the URL (it may carry a password) never is.
    for set_name, lag in (("redis-cluster", 3000), ("default", 5000)):
        db = engine_config(set_name)["database"]
        assert db.get("read_replica_max_lag_ms") == lag and type(db["read_replica_max_lag_ms"]) is int, (set_name, db)
        assert "read_replica_url" not in db, db
check("read replica: coordinators (only) get BATON_DATABASE__READ_REPLICA_URL from read-replica-url, optional; lag bound in the config", read_replica_wiring)

def read_replica_schema():
    base = values("redis-cluster")
    refused({**base, "secrets": {**base["secrets"], "readReplicaUrl": "mysql://baton:pw@replica:3306/baton"}}, "readReplicaUrl")
    refused({**base, "database": {"readReplicaMaxLagMs": 0}}, "readReplicaMaxLagMs")
    refused({**base, "database": {"readReplicaMaxLagMs": "3000"}}, "readReplicaMaxLagMs")
    refused({**base, "database": {"readReplicaMaxLag": 3000}}, "readReplicaMaxLag")  # typo
    # The engine reads a replica of a postgres:// primary only.
    refused({**base, "secrets": {**base["secrets"], "databaseUrl": "sqlite:///var/lib/baton/baton.db"}}, "databaseUrl")
    chart.validate_schema({"secrets": {"readReplicaUrl": "postgresql://r/baton", "databaseUrl": "postgresql://p/baton"}})
    chart.validate_schema({"secrets": {"readReplicaUrl": "", "databaseUrl": "sqlite:///var/lib/baton/baton.db"}})
check("schema: readReplicaUrl is empty or postgres(ql)://, with a postgres primary; readReplicaMaxLagMs a positive integer", read_replica_schema)

def per_role_images():
    want = {"gateway": ("registry.example.com/baton/baton:0.1.0-gateway", "IfNotPresent"),
            "coordinator": ("registry.example.com/baton/coordinator:0.1.0", "Always"),
            "worker": ("registry.example.com/baton/worker:0.1.0", "IfNotPresent")}
    for component, (image, policy) in want.items():
        (c,) = deployment("operations", component)["spec"]["template"]["spec"]["containers"]
        assert (c["image"], c["imagePullPolicy"]) == (image, policy), (component, c["image"], c["imagePullPolicy"])
    (job,) = objects("operations", "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == want["coordinator"][0], "migrate runs the coordinators' image"
check("per-role images over the shared default (migration uses the coordinators')", per_role_images)

def extra_env_and_env_from():
    for component in ("gateway", "coordinator", "worker"):
        (c,) = deployment("operations", component)["spec"]["template"]["spec"]["containers"]
        env = env_of(c)
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.monitoring:4317", component
        refs = c["envFrom"]
        assert refs[0] == {"configMapRef": {"name": "baton-otel"}}, refs
        if component == "worker":
            names = list(env)
            assert names.index("OTEL_EXPORTER_OTLP_ENDPOINT") < names.index("RUST_LOG"), "shared env first"
            assert refs[1] == {"secretRef": {"name": "worker-extra"}}, refs
        else:
            assert "RUST_LOG" not in env and len(refs) == 1, component
        (d,) = deployment("default", component)["spec"]["template"]["spec"]["containers"]
        assert "envFrom" not in d and "OTEL_EXPORTER_OTLP_ENDPOINT" not in env_of(d), component
check("extraEnv/envFrom: shared then per role; none by default", extra_env_and_env_from)

def ingress_route_and_allowed_hosts():
    (ing,) = objects("operations", "Ingress")
    assert ing["spec"]["ingressClassName"] == "nginx" and ing["spec"]["tls"][0]["secretName"] == "baton-example-tls"
    (rule,) = ing["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert rule["host"] == "baton.example.com" and path["path"] == "/" and path["pathType"] == "Prefix", rule
    assert path["backend"]["service"] == {"name": "baton-gateway", "port": {"name": "http"}}, path
    (route,) = objects("operations", "HTTPRoute")
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"] == [{"name": "public", "namespace": "gateway-system"}]
    (r,) = route["spec"]["rules"]
    assert r["backendRefs"] == [{"name": "baton-gateway", "port": 80}], r
    assert r["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}], r
    hosts = engine_config("operations")["gateway"]["allowed_hosts"]
    assert hosts == ["mcp.example.com", "baton.example.com", "api.example.com"], hosts
    assert engine_config("default")["gateway"]["allowed_hosts"] == []
    assert not objects("default", "Ingress") and not objects("default", "HTTPRoute")
    base = values("default")
    refused({**base, "gateway": {"ingress": {"enabled": True}}}, "gateway.ingress.hosts")
    refused({**base, "gateway": {"httpRoute": {"enabled": True}}}, "gateway.httpRoute.parentRefs")
check("Ingress and HTTPRoute to the gateway Service; their hosts join gateway.allowedHosts", ingress_route_and_allowed_hosts)

def metrics_listener_and_pod_monitor():
    assert engine_config("operations")["telemetry"] == {"metrics_addr": "0.0.0.0:9464"}
    for component in ("gateway", "coordinator", "worker"):
        (c,) = deployment("operations", component)["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["metrics"] == 9464, (component, ports)
        (d,) = deployment("default", component)["spec"]["template"]["spec"]["containers"]
        assert "metrics" not in {p["name"] for p in d["ports"]}, component
    (w,) = deployment("operations", "worker")["spec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in w["ports"]}["tool-metrics"] == 9090
    assert w["readinessProbe"]["httpGet"]["port"] == "tool-metrics"
    (pm,) = objects("operations", "PodMonitor")
    assert pm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    sel = pm["spec"]["selector"]
    assert sel["matchLabels"] == {"app.kubernetes.io/name": "baton", "app.kubernetes.io/instance": "baton"}, sel
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert "telemetry" not in engine_config("default") and not objects("default", "PodMonitor")
check("metrics: telemetry.metrics_addr and port `metrics` on every role, PodMonitor, off by default", metrics_listener_and_pod_monitor)

def drain_alignment():
    def pod(set_name, component):
        spec = deployment(set_name, component)["spec"]["template"]["spec"]
        return spec, spec["containers"][0]
    for set_name, sleep, drain_ms in (("default", 5, 10000), ("operations", 10, 20000)):
        spec, c = pod(set_name, "gateway")
        assert engine_config(set_name)["gateway"]["drain_timeout_ms"] == drain_ms
        assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(sleep)], c["lifecycle"]
        # preStop, then the drain, then time to exit: the kubelet never kills a draining gateway.
        assert spec["terminationGracePeriodSeconds"] == sleep + drain_ms // 1000 + 5, spec["terminationGracePeriodSeconds"]
    spec, c = pod("default", "coordinator")
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"] and spec["terminationGracePeriodSeconds"] == 35
    spec, c = pod("default", "worker")
    assert "lifecycle" not in c and spec["terminationGracePeriodSeconds"] == 40
    odd = render_objects({**values("default"), "gateway": {"drainTimeoutMs": 10500}})
    gw = next(o for o in odd if o["kind"] == "Deployment" and o["metadata"]["name"] == "baton-gateway")
    assert gw["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 5 + 11 + 5, "the drain rounds up"
check("grace periods cover preStop + drain (rounded up); no preStop on workers", drain_alignment)

def topology_spread():
    spec = deployment("default", "gateway")["spec"]["template"]["spec"]
    keys = [(t["topologyKey"], t["whenUnsatisfiable"]) for t in spec["topologySpreadConstraints"]]
    assert keys == [("topology.kubernetes.io/zone", "ScheduleAnyway"), ("kubernetes.io/hostname", "ScheduleAnyway")], keys
    for t in spec["topologySpreadConstraints"]:
        assert t["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "gateway", t
    (own,) = deployment("operations", "worker")["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert own["whenUnsatisfiable"] == "DoNotSchedule" and own["maxSkew"] == 2, own
    objs = render_objects({**values("default"), "topologySpread": {"enabled": False}})
    gw = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "baton-gateway")
    assert "topologySpreadConstraints" not in gw["spec"]["template"]["spec"]
check("topology spread: soft over zone and node per role; a role's own list replaces it", topology_spread)

def grafana_dashboard():
    import json, re
    with open(DASHBOARD) as f:
        board = json.load(f)
    exprs = []
    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                exprs.append(node["expr"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(board["panels"])
    used = set()
    for e in exprs:
        for name in re.findall(r"\b(?:baton|http_server|rpc_server|mcp_server)_[a-z_]+", e):
            used.add(re.sub(r"_(bucket|sum|count)$", "", name))
        assert not re.search(r"\b(execution_id|user_id)\b", e), f"per-execution label in {e}"
    assert used <= METRICS | {"baton_worker_tool_invocations_total"}, used - METRICS
    assert METRICS <= used, f"not on the dashboard: {sorted(METRICS - used)}"
    # Every name is one the code exports: an OpenTelemetry instrument (dots for
    # underscores, before the unit and `_total` suffixes) or a name written out.
    sources = []
    for root in ("coordinator", "gateway", "worker", "proto", "src"):
        for r, _, fs in os.walk(root):
            sources += [open(os.path.join(r, f)).read() for f in fs if f.endswith(".rs")]
    code = "\n".join(sources)
    instruments = set(re.findall(r"_(?:counter|histogram|gauge)\(\s*\"([a-z_.]+)\"", code))
    def exported(name):
        base = re.sub(r"_seconds$", "", re.sub(r"_total$", "", name))
        return name in code or any(i.replace(".", "_") == base for i in instruments)
    missing = sorted(n for n in used if not exported(n))
    assert not missing, f"the code exports no such metric: {missing}"
    assert board["uid"] and board["title"], "dashboard identity"
    ds = {p.get("datasource", {}).get("uid") for p in board["panels"] if p.get("type") != "row"}
    assert ds == {"${datasource}"}, ds
check("Grafana dashboard: valid JSON, every exported metric shown, no other metric, no per-execution label", grafana_dashboard)

# --- optional: the real binary accepts the rendered config and the examples -------
binary = os.environ.get("BATON_BIN")
ROLES = (("coordinator", "--listen", "127.0.0.1:0"), ("gateway", "--listen", "127.0.0.1:0"), ("worker", "--examples"))

def start(role, config, extra, env=None):
    # A config error exits 64 before any connection; otherwise the role starts (and
    # fails to reach the fake database, or is still running when the timeout kills it).
    try:
        p = subprocess.run([binary, role, "--config", config, *extra], env=env, capture_output=True, text=True, timeout=2)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        return None, (e.stderr or b"").decode()

def accepts(role, config, extra, env=None):
    code, err = start(role, config, extra, env)
    if code == 64 and "metrics_addr" in err:
        # The chart renders telemetry.metrics_addr (metrics.enabled) ahead of a
        # binary that knows it: check the rest of the file, and say so.
        with open(config) as f:
            cfg = yaml.safe_load(f)
        cfg.get("telemetry", {}).pop("metrics_addr", None)
        if not cfg.get("telemetry"):
            cfg.pop("telemetry", None)
        config = config.replace(".engine.yaml", ".engine-no-metrics.yaml")
        with open(config, "w") as f:
            yaml.safe_dump(cfg, f)
        print(f"     note: this binary has no telemetry.metrics_addr yet; {role} checked without it")
        code, err = start(role, config, extra, env)
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
        own = next((s["stringData"] for s in objects(set_name, "Secret") if s["metadata"]["name"] == "baton"), {})
        # The replica URL as the Secret gives it (validated against the postgres primary above).
        set_env = {**env, **({REPLICA_ENV: own["read-replica-url"]} if "read-replica-url" in own else {})}
        for role, *extra in ROLES:
            accepts(role, path, extra, set_env)
    for role, *extra in ROLES:
        accepts(role, f"deploy/examples/{role}.yaml", extra)

if binary:
    check("the baton binary loads each rendered config and deploy/examples (exit != 64)", engine_accepts_rendered_config)

print(f"chart checks: {passed} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
PY
