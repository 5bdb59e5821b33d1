{{/* Names: every name fits a DNS label (63 characters) with the suffixes below (the longest is "-config"). */}}
{{- define "dagger.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "dagger.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dagger.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "dagger.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dagger.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dagger.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dagger.driverSelectorLabels" -}}
{{ include "dagger.selectorLabels" . }}
app.kubernetes.io/component: driver
{{- end }}

{{- define "dagger.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dagger.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dagger.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "dagger.configMapName" -}}
{{- default (printf "%s-config" (include "dagger.fullname" .)) .Values.job.existingConfigMap }}
{{- end }}

{{/* The checkpoint directory of this generation. */}}
{{- define "dagger.checkpoint" -}}
{{- $base := default "/var/lib/dagger/checkpoints" .Values.checkpoint.location }}
{{- printf "%s/gen-%d" (trimSuffix "/" $base) (int .Values.checkpoint.generation) }}
{{- end }}

{{- define "dagger.checkpointClaim" -}}
{{- if and (not .Values.checkpoint.location) .Values.checkpoint.persistence.enabled }}
{{- default (printf "%s-checkpoint" (include "dagger.fullname" .)) .Values.checkpoint.persistence.existingClaim }}
{{- end }}
{{- end }}

{{/* Spark settings of every mode: the image's connector jars (Spark's Kafka connector, spark-avro) on the class
path of drivers and executors started from it, then the user's. */}}
{{- define "dagger.sparkConf" -}}
{{- $conf := dict }}
{{- if eq .Values.mode "local" }}
{{- $_ := set $conf "spark.driver.memory" (toString .Values.spark.driver.memory) }}
{{- else }}
{{- $_ := set $conf "spark.driver.extraClassPath" "/opt/dagger/jars/*" }}
{{- $_ := set $conf "spark.executor.extraClassPath" "/opt/dagger/jars/*" }}
{{- end }}
{{- range $key, $value := .Values.spark.conf }}
{{- $_ := set $conf $key (toString $value) }}
{{- end }}
{{- toYaml $conf }}
{{- end }}

{{/* The job's own arguments after the config path: the checkpoint, the metrics port, the user's. */}}
{{- define "dagger.jobArgs" -}}
- --checkpoint-dir
- {{ include "dagger.checkpoint" . | quote }}
{{- if .Values.metrics.enabled }}
- --METRIC_PROMETHEUS_PORT
- {{ .Values.metrics.port | quote }}
{{- end }}
{{- range .Values.job.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* What restarts the job: its config, its Spark settings, the nonce. */}}
{{- define "dagger.podAnnotations" -}}
checksum/config: {{ printf "%s|%s|%s" (toJson .Values.job.config) (include "dagger.sparkConf" .) (include "dagger.checkpoint" .) | sha256sum }}
{{- with .Values.job.restartNonce }}
dagger.raystack.io/restart-nonce: {{ . | quote }}
{{- end }}
{{- if and .Values.metrics.enabled (ne .Values.mode "operator") }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: {{ .Values.metrics.path | quote }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Environment of the driver and executors. */}}
{{- define "dagger.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- if ne .Values.mode "operator" }}
- name: SPARK_CONF_DIR
  value: /etc/dagger/spark
{{- end }}
{{- if .Values.gcpCredentials.existingSecret }}
- name: GOOGLE_APPLICATION_CREDENTIALS
  value: /var/secrets/google/{{ .Values.gcpCredentials.key }}
{{- end }}
{{- with .Values.job.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "dagger.envFrom" -}}
{{- if .Values.existingSecret }}
- secretRef:
    name: {{ .Values.existingSecret }}
{{- end }}
{{- end }}

{{/* Volumes: the job config, the Spark settings, the checkpoint, the Google key. */}}
{{- define "dagger.volumes" -}}
- name: job-config
  configMap:
    name: {{ include "dagger.configMapName" . }}
{{- if ne .Values.mode "operator" }}
- name: spark-conf
  configMap:
    name: {{ include "dagger.fullname" . }}-spark
{{- end }}
{{- with (include "dagger.checkpointClaim" .) }}
- name: checkpoint
  persistentVolumeClaim:
    claimName: {{ . }}
{{- else }}
{{- if not $.Values.checkpoint.location }}
- name: checkpoint
  emptyDir: {}
{{- end }}
{{- end }}
{{- if .Values.gcpCredentials.existingSecret }}
- name: gcp-credentials
  secret:
    secretName: {{ .Values.gcpCredentials.existingSecret }}
{{- end }}
{{- end }}

{{- define "dagger.volumeMounts" -}}
- name: job-config
  mountPath: /etc/dagger/job.json
  subPath: {{ .Values.job.configKey }}
  readOnly: true
{{- if ne .Values.mode "operator" }}
- name: spark-conf
  mountPath: /etc/dagger/spark
  readOnly: true
{{- end }}
{{- if not .Values.checkpoint.location }}
- name: checkpoint
  mountPath: /var/lib/dagger/checkpoints
{{- end }}
{{- if .Values.gcpCredentials.existingSecret }}
- name: gcp-credentials
  mountPath: /var/secrets/google
  readOnly: true
{{- end }}
{{- end }}

{{/* What the driver and the executors of a SparkApplication share. */}}
{{- define "dagger.operatorPod" -}}
env:
  {{- include "dagger.env" . | nindent 2 }}
{{- with (include "dagger.envFrom" .) }}
envFrom:
  {{- . | trim | nindent 2 }}
{{- end }}
volumeMounts:
  {{- include "dagger.volumeMounts" . | nindent 2 }}
podSecurityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
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
{{- end }}
