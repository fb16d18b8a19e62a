{{/* The chart's name, shortened to fit a DNS label. */}}
{{- define "infergate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object of the release. A release whose name already contains the chart's
keeps its own name, so `helm install infergate .` does not make `infergate-infergate`.
*/}}
{{- define "infergate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "infergate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
What the Deployment and Services select on. The role is left out: selectors are immutable, and
a release's identity is its name, not what it currently runs as.
*/}}
{{- define "infergate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "infergate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "infergate.labels" -}}
helm.sh/chart: {{ include "infergate.chart" . }}
{{ include "infergate.selectorLabels" . }}
app.kubernetes.io/component: {{ .Values.role }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "infergate.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The InferenceGatewayConfig the gateway serves. */}}
{{- define "infergate.configName" -}}
{{- .Values.gateway.configName | default (include "infergate.fullname" .) }}
{{- end }}

{{/* The InferencePool the picker serves. */}}
{{- define "infergate.poolName" -}}
{{- .Values.epp.poolName | default .Release.Name }}
{{- end }}

{{/* The gateway role's rules for electing the status writer and publishing its Events. */}}
{{- define "infergate.leaderElectionRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]
# Events go through the events.k8s.io API (kube-rs's recorder; a repeated event is a patch of
# its series).
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end }}
