{{- define "baton.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "baton.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "baton.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "baton.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels; call with (dict "ctx" $ "component" "gateway"). */}}
{{- define "baton.selectorLabels" -}}
app.kubernetes.io/name: {{ include "baton.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "baton.labels" -}}
{{ include "baton.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* A role's image: its own image fields over the shared `image`. Call with (list $ "gateway"). */}}
{{- define "baton.image" -}}
{{- $ctx := index . 0 -}}
{{- $img := mergeOverwrite (deepCopy $ctx.Values.image) (deepCopy ((index $ctx.Values (index . 1)).image | default dict)) -}}
image: {{ printf "%s:%s" $img.repository ($img.tag | default $ctx.Chart.AppVersion) | quote }}
imagePullPolicy: {{ $img.pullPolicy | default "IfNotPresent" }}
{{- end -}}

{{/* "true" when more than one gateway pod may run (fixed replicas or the autoscaler's ceiling). */}}
{{- define "baton.manyGateways" -}}
{{- $g := .Values.gateway -}}
{{- if $g.autoscaling.enabled -}}{{ gt (int $g.autoscaling.maxReplicas) 1 }}{{- else -}}{{ gt (int $g.replicas) 1 }}{{- end -}}
{{- end -}}

{{- define "baton.manyCoordinators" -}}
{{- gt (int .Values.coordinator.replicas) 1 -}}
{{- end -}}

{{/* "true" when coordinators use a Redis Cluster: they get redis.cluster_nodes, not redis.url. */}}
{{- define "baton.redisCluster" -}}
{{- $s := .Values.secrets -}}
{{- if and .Values.redis.cluster (not $s.existingSecret) (not $s.redisClusterNodes) -}}
{{- fail "redis.cluster needs secrets.redisClusterNodes (or secrets.existingSecret holding redis-cluster-nodes)" -}}
{{- end -}}
{{- or (.Values.redis.cluster | default false) (not (empty $s.redisClusterNodes)) -}}
{{- end -}}

{{/*
The shared extraEnv, then the role's. Call with (list $ "gateway").
*/}}
{{- define "baton.extraEnv" -}}
{{- $ctx := index . 0 -}}
{{- $env := concat ($ctx.Values.extraEnv | default list) ((index $ctx.Values (index . 1)).extraEnv | default list) -}}
{{- with $env }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{- define "baton.envFrom" -}}
{{- $ctx := index . 0 -}}
{{- $from := concat ($ctx.Values.envFrom | default list) ((index $ctx.Values (index . 1)).envFrom | default list) -}}
{{- with $from }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
Soft spread of one role's pods over the shared topology keys, unless the role
lists its own constraints. Call with (list $ "gateway").
*/}}
{{- define "baton.topologySpread" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
{{- $own := (index $ctx.Values $component).topologySpreadConstraints -}}
{{- $t := $ctx.Values.topologySpread -}}
{{- if $own }}
topologySpreadConstraints:
  {{- toYaml $own | nindent 2 }}
{{- else if $t.enabled }}
topologySpreadConstraints:
{{- range $t.topologyKeys }}
  - maxSkew: {{ $t.maxSkew }}
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $t.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "baton.selectorLabels" (dict "ctx" $ctx "component" $component) | nindent 8 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The metrics listener's container port, when metrics are on. */}}
{{- define "baton.metricsPort" -}}
{{- if .Values.metrics.enabled }}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
{{- end }}
{{- end -}}

{{/* Hosts MCP may be reached by: gateway.allowedHosts, Ingress hosts, HTTPRoute hostnames. */}}
{{- define "baton.allowedHosts" -}}
{{- $g := .Values.gateway -}}
{{- $hosts := list -}}
{{- range $g.allowedHosts }}{{ $hosts = append $hosts . }}{{ end -}}
{{- if $g.ingress.enabled }}{{ range $g.ingress.hosts }}{{ $hosts = append $hosts .host }}{{ end }}{{ end -}}
{{- if $g.httpRoute.enabled }}{{ range $g.httpRoute.hostnames }}{{ $hosts = append $hosts . }}{{ end }}{{ end -}}
{{- toJson (uniq $hosts) -}}
{{- end -}}

{{- define "baton.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "baton.fullname" .) -}}
{{- end -}}

{{- define "baton.grpcScheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{- define "baton.coordinatorUrl" -}}
{{ include "baton.grpcScheme" . }}://{{ include "baton.fullname" . }}-coordinator:{{ .Values.coordinator.port }}
{{- end -}}

{{/*
TLS on the gRPC hops (tls.enabled). Files are mounted from Secrets under
/etc/baton-tls and named to the engine as BATON_TLS__* env vars:
own/tls.crt + own/tls.key (the coordinators' server certificate, or the client
certificate of gateways and workers) and ca/ca.crt (verifies coordinators and,
with mTLS, client certificates). Call with (list $ "coordinator"|"gateway"|"worker").
*/}}
{{- define "baton.tlsOwnSecret" -}}
{{- $ctx := index . 0 -}}
{{- $t := $ctx.Values.tls -}}
{{- if eq (index . 1) "coordinator" -}}
{{- required "tls.coordinatorSecret is required when tls.enabled" $t.coordinatorSecret -}}
{{- else if ne $t.clientAuth "none" -}}
{{- required "tls.clientSecret is required when tls.enabled and tls.clientAuth is not none" $t.clientSecret -}}
{{- else -}}
{{- $t.clientSecret -}}
{{- end -}}
{{- end -}}

{{- define "baton.tlsEnv" -}}
{{- $ctx := index . 0 -}}
{{- $t := $ctx.Values.tls -}}
{{- if $t.enabled -}}
- name: BATON_TLS__CA_FILE
  value: /etc/baton-tls/ca/ca.crt
{{- if include "baton.tlsOwnSecret" . }}
- name: BATON_TLS__CERT_FILE
  value: /etc/baton-tls/own/tls.crt
- name: BATON_TLS__KEY_FILE
  value: /etc/baton-tls/own/tls.key
{{- end }}
# Peers dial pod IPs, so every client checks the Service name on the certificate.
- name: BATON_TLS__SERVER_NAME
  value: {{ $t.serverName | default (printf "%s-coordinator" (include "baton.fullname" $ctx)) | quote }}
{{- if and (eq (index . 1) "coordinator") (ne $t.clientAuth "none") }}
- name: BATON_TLS__CLIENT_CA_FILE
  value: /etc/baton-tls/ca/ca.crt
- name: BATON_TLS__REQUIRE_CLIENT_CERT
  value: {{ eq $t.clientAuth "required" | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{- define "baton.tlsMounts" -}}
{{- $ctx := index . 0 -}}
{{- if $ctx.Values.tls.enabled -}}
- {name: tls-ca, mountPath: /etc/baton-tls/ca, readOnly: true}
{{- if include "baton.tlsOwnSecret" . }}
- {name: tls-own, mountPath: /etc/baton-tls/own, readOnly: true}
{{- end }}
{{- end -}}
{{- end -}}

{{- define "baton.tlsVolumes" -}}
{{- $ctx := index . 0 -}}
{{- $t := $ctx.Values.tls -}}
{{- if $t.enabled -}}
- name: tls-ca
  secret:
    secretName: {{ required "tls.caSecret is required when tls.enabled" $t.caSecret }}
    items:
      - {key: {{ $t.caKey }}, path: ca.crt}
{{- with include "baton.tlsOwnSecret" . }}
- name: tls-own
  secret:
    secretName: {{ . }}
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
{{- end }}
{{- end -}}
{{- end -}}

{{/*
The engine's YAML config (src/config.rs). Secrets are not in it: they arrive as
BATON_SECTION__FIELD env vars, which the engine applies over this file.
Numbers go through int64 because Helm parses values as float64, which would
print 1048576 as 1.048576e+06.
*/}}
{{- define "baton.engineConfig" -}}
{{- $m := .Values.features.mcpTasks -}}
{{- $features := dict "native_mcp_tasks" $m.nativeEnabled "mcp_tasks_compatibility" $m.compatibilityEnabled -}}
{{- $bounds := dict "principalConcurrency" "principal_concurrency" "projectConcurrency" "project_concurrency" "organizationConcurrency" "organization_concurrency" "backlog" "backlog" "retainedPayloadBytes" "retained_payload_bytes" -}}
{{- range $from, $to := $bounds -}}
{{- $v := index $m $from -}}
{{- if not (kindIs "invalid" $v) -}}
{{- $_ := set $features (printf "mcp_tasks_%s" $to) (int64 $v) -}}
{{- end -}}
{{- end -}}
{{- with $m.compatibilityPrefix -}}
{{- $_ := set $features "mcp_tasks_compatibility_prefix" . -}}
{{- end -}}
{{- $config := dict
  "features" $features
  "database" (dict "max_connections" (int64 .Values.database.maxConnections) "read_replica_max_lag_ms" (int64 .Values.database.readReplicaMaxLagMs))
  "redis" (dict "key_prefix" .Values.redis.keyPrefix)
  "coordinator" (dict "listen" (printf "0.0.0.0:%d" (int .Values.coordinator.port)))
  "gateway" (dict "listen" (printf "0.0.0.0:%d" (int .Values.gateway.port)) "coordinator_url" (include "baton.coordinatorUrl" .) "header_read_timeout_ms" (int64 .Values.gateway.headerReadTimeoutMs) "idle_timeout_ms" (int64 .Values.gateway.idleTimeoutMs) "drain_timeout_ms" (int64 .Values.gateway.drainTimeoutMs) "max_waits_per_principal" (int64 .Values.gateway.maxWaitsPerPrincipal) "max_waits" (int64 .Values.gateway.maxWaits) "allowed_hosts" (include "baton.allowedHosts" . | fromJsonArray))
  "worker" (dict "coordinator_url" (include "baton.coordinatorUrl" .) "capacity" (int64 .Values.worker.capacity) "drain_timeout_ms" (int64 .Values.worker.drainTimeoutMs) "metrics_listen" (printf "0.0.0.0:%d" (int .Values.worker.metricsPort)))
-}}
{{- with .Values.worker.remoteServers -}}
{{- $_ := set $config.worker "remote_servers" . -}}
{{- end -}}
{{- if .Values.metrics.enabled -}}
{{- $_ := set $config "telemetry" (dict "metrics_addr" (printf "0.0.0.0:%d" (int .Values.metrics.port))) -}}
{{- end -}}
{{- toYaml (mergeOverwrite $config (deepCopy .Values.config)) -}}
{{- end -}}

{{/* One env var from the Secret; call with (list $ "BATON_X__Y" "key" optional). A needed
key (not optional) that an existing Secret lacks keeps the pod from starting. */}}
{{- define "baton.secretEnv" -}}
{{- $ctx := index . 0 -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "baton.secretName" $ctx }}
      key: {{ index . 2 }}
      {{- if index . 3 }}
      optional: true
      {{- end }}
{{- end -}}

{{/*
Pod-level settings shared by every workload. Service links are off because
Kubernetes would inject BATON_*-prefixed variables for the chart's Services,
which share the engine's override namespace.
*/}}
{{- define "baton.podCommon" -}}
enableServiceLinks: false
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Roll pods when the config or the Secret changes. */}}
{{- define "baton.podAnnotations" -}}
checksum/config: {{ include "baton.engineConfig" . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "baton.configVolume" -}}
- name: config
  configMap:
    name: {{ include "baton.fullname" . }}
{{- end -}}
