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

{{- define "baton.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "baton.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "baton.fullname" .) -}}
{{- end -}}

{{- define "baton.coordinatorUrl" -}}
http://{{ include "baton.fullname" . }}-coordinator:{{ .Values.coordinator.port }}
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
  "database" (dict "max_connections" (int64 .Values.database.maxConnections))
  "redis" (dict "key_prefix" .Values.redis.keyPrefix)
  "coordinator" (dict "listen" (printf "0.0.0.0:%d" (int .Values.coordinator.port)))
  "gateway" (dict "listen" (printf "0.0.0.0:%d" (int .Values.gateway.port)) "coordinator_url" (include "baton.coordinatorUrl" .))
  "worker" (dict "coordinator_url" (include "baton.coordinatorUrl" .) "capacity" (int64 .Values.worker.capacity) "metrics_listen" (printf "0.0.0.0:%d" (int .Values.worker.metricsPort)))
-}}
{{- toYaml (mergeOverwrite $config (deepCopy .Values.config)) -}}
{{- end -}}

{{/* One env var from the Secret; call with (list $ "BATON_X__Y" "key" optional). */}}
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
