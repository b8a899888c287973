{{/* Names: "<release>-crossdock" (or the release name when it already holds the
chart's name), at most 50 characters so that "-coordinator" still fits a DNS label. */}}
{{- define "crossdock.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "crossdock.coordinatorName" -}}
{{- printf "%s-coordinator" (include "crossdock.fullname" .) -}}
{{- end -}}

{{/* The workers' StatefulSet and its headless Service share this name. */}}
{{- define "crossdock.workerName" -}}
{{- printf "%s-worker" (include "crossdock.fullname" .) -}}
{{- end -}}

{{/* The coordinator's address, HOST:PORT, as workers and Spark dial it. */}}
{{- define "crossdock.coordinatorAddress" -}}
{{- printf "%s.%s.svc.%s:%d" (include "crossdock.coordinatorName" .) .Release.Namespace .Values.clusterDomain (int .Values.ports.coordinator) -}}
{{- end -}}

{{- define "crossdock.authSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-secret" (include "crossdock.fullname" .)) -}}
{{- end -}}

{{- define "crossdock.authSecretKey" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecretKey }}{{- else -}}secret{{- end -}}
{{- end -}}

{{- define "crossdock.objectStoreSecretName" -}}
{{- .Values.objectStore.credentials.existingSecret | default (printf "%s-object-store" (include "crossdock.fullname" .)) -}}
{{- end -}}

{{- define "crossdock.objectStoreHasCredentials" -}}
{{- with .Values.objectStore.credentials -}}
{{- if or .existingSecret .accessKeyId -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{- define "crossdock.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: include with (list $ "coordinator"). */}}
{{- define "crossdock.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ $root.Chart.Name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "crossdock.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Flags and mounts every server shares: the cluster secret and TLS. */}}
{{- define "crossdock.commonArgs" -}}
- --log={{ .Values.logLevel }}
- --metrics-listen={{ .Values.bindAddress }}:{{ .Values.ports.metrics }}
{{- if .Values.auth.enabled }}
- --secret-file=/etc/crossdock/auth/secret
{{- else }}
- --no-auth
{{- end }}
{{- if .Values.tls.enabled }}
- --tls-cert=/etc/crossdock/tls/tls.crt
- --tls-key=/etc/crossdock/tls/tls.key
- --tls-ca=/etc/crossdock/tls/ca.crt
{{- end }}
{{- end -}}

{{- define "crossdock.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.auth.enabled }}
- name: auth
  mountPath: /etc/crossdock/auth
  readOnly: true
{{- end }}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/crossdock/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "crossdock.commonVolumes" -}}
- name: tmp
  emptyDir: {}
{{- if .Values.auth.enabled }}
- name: auth
  secret:
    secretName: {{ include "crossdock.authSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ include "crossdock.authSecretKey" . }}
        path: secret
{{- end }}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ .Values.tls.existingSecret }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}

{{/* Startup, liveness and readiness probes: GET /healthz on the metrics port. */}}
{{- define "crossdock.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: {{ .Values.probes.startup.periodSeconds }}
  failureThreshold: {{ .Values.probes.startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
{{- end -}}

{{/* A pod's annotations, YAML or nothing: include with (list $ podAnnotations). */}}
{{- define "crossdock.podAnnotations" -}}
{{- $root := index . 0 -}}
{{- $ann := dict -}}
{{- if $root.Values.metrics.podAnnotations -}}
{{- $_ := set $ann "prometheus.io/scrape" "true" -}}
{{- $_ := set $ann "prometheus.io/port" ($root.Values.ports.metrics | toString) -}}
{{- $_ := set $ann "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- $ann = merge $ann (index . 1 | default dict) -}}
{{- with $ann }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* Checks across values that the schema cannot express; fails the render. */}}
{{- define "crossdock.validate" -}}
{{- if and (eq (int .Values.coordinator.replication) 2) (lt (int .Values.worker.replicas) 2) -}}
{{- fail "coordinator.replication 2 needs worker.replicas >= 2" -}}
{{- end -}}
{{- if and (eq .Values.coordinator.durability "object-store") (not .Values.objectStore.url) -}}
{{- fail "coordinator.durability object-store needs objectStore.url" -}}
{{- end -}}
{{- if and .Values.objectStore.diskQuota (not .Values.objectStore.url) -}}
{{- fail "objectStore.diskQuota needs objectStore.url" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.enabled needs tls.existingSecret (a Secret with tls.crt, tls.key and ca.crt)" -}}
{{- end -}}
{{- if and .Values.auth.enabled (not .Values.auth.existingSecret) .Values.auth.secret (lt (len .Values.auth.secret) 32) -}}
{{- fail "auth.secret must be at least 32 characters" -}}
{{- end -}}
{{- with .Values.objectStore.credentials -}}
{{- if and (not .existingSecret) (or .accessKeyId .secretAccessKey) (not (and .accessKeyId .secretAccessKey)) -}}
{{- fail "objectStore.credentials: give both accessKeyId and secretAccessKey" -}}
{{- end -}}
{{- end -}}
{{- end -}}
