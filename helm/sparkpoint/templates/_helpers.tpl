{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "sparkpoint.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; short enough for "<name>-headless" and pod names. */}}
{{- define "sparkpoint.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sparkpoint.headless" -}}
{{- printf "%s-headless" (include "sparkpoint.fullname" .) }}
{{- end }}

{{/* Kubernetes' recommended labels. */}}
{{- define "sparkpoint.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sparkpoint.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/component: coordinator
app.kubernetes.io/part-of: sparkpoint
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The `helm test` pod's: never matched by the selectors of the replicas' workload,
     Services or PodDisruptionBudget. */}}
{{- define "sparkpoint.testLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "sparkpoint.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/component: test
app.kubernetes.io/part-of: sparkpoint
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sparkpoint.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sparkpoint.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sparkpoint.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sparkpoint.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sparkpoint.clusterId" -}}
{{- default .Release.Name .Values.zookeeper.clusterId }}
{{- end }}

{{- /* repository:tag, pinned by @digest when image.digest is set. */}}
{{- define "sparkpoint.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* The sparkpoint configuration file: Flink-like keys, the chart's first, then `config`. */}}
{{- define "sparkpoint.config" -}}
{{- $cfg := dict
  "high-availability.type" "zookeeper"
  "high-availability.zookeeper.quorum" .Values.zookeeper.quorum
  "high-availability.zookeeper.path.root" .Values.zookeeper.root
  "high-availability.cluster-id" (include "sparkpoint.clusterId" .)
  "high-availability.zookeeper.client.session-timeout" .Values.zookeeper.sessionTimeout
  "high-availability.zookeeper.client.connection-timeout" .Values.zookeeper.connectionTimeout
  "high-availability.zookeeper.client.acl" .Values.zookeeper.acl
  "rest.bind-address" "0.0.0.0"
  "rest.port" .Values.service.port
  "state.checkpoints.dir" .Values.storage.checkpointsDir
  "state.checkpoints.num-retained" .Values.checkpointing.numRetained
  "execution.checkpointing.interval" .Values.checkpointing.interval
  "execution.checkpointing.timeout" .Values.checkpointing.timeout
  "execution.checkpointing.min-pause" .Values.checkpointing.minPause
  "execution.checkpointing.max-concurrent-checkpoints" .Values.checkpointing.maxConcurrent
  "execution.checkpointing.tolerable-failed-checkpoints" .Values.checkpointing.tolerableFailures
}}
{{- if .Values.storage.savepointsDir }}
{{- $_ := set $cfg "state.savepoints.dir" .Values.storage.savepointsDir }}
{{- end }}
{{- include "sparkpoint.securityConfig" (dict "cfg" $cfg "Values" .Values) }}
{{- range $key, $value := .Values.config }}
{{- $_ := set $cfg $key $value }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* REST authentication and TLS keys (docs/security.md); the files are mounted Secrets. */}}
{{- define "sparkpoint.securityConfig" -}}
{{- $cfg := .cfg }}
{{- $_ := set $cfg "rest.auth.enabled" .Values.auth.enabled }}
{{- if .Values.auth.enabled }}
{{- $_ := set $cfg "rest.auth.token-file" (printf "/var/run/sparkpoint/auth/%s" .Values.auth.key) }}
{{- $_ := set $cfg "rest.auth.protect-metrics" .Values.auth.protectMetrics }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- $_ := set $cfg "security.ssl.rest.enabled" true }}
{{- $_ := set $cfg "security.ssl.rest.cert-file" "/var/run/sparkpoint/tls/tls.crt" }}
{{- $_ := set $cfg "security.ssl.rest.key-file" "/var/run/sparkpoint/tls/tls.key" }}
{{- if .Values.tls.clientAuth }}
{{- $_ := set $cfg "security.ssl.rest.ca-file" "/var/run/sparkpoint/tls/ca.crt" }}
{{- $_ := set $cfg "security.ssl.rest.client-auth" true }}
{{- end }}
{{- end }}
{{- end }}

{{/* http or https, as the REST API is served. */}}
{{- define "sparkpoint.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}
