{{/*
The base of every object's name: the release name, or <release>-flotilla when the release name
does not say flotilla. A release named flotilla names its objects as manifests/ does.
*/}}
{{- define "flotilla.fullname" -}}
{{- if contains "flotilla" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-flotilla" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The label manifests/ puts on every object, which the Deployment also selects by. */}}
{{- define "flotilla.selectorLabels" -}}
app.kubernetes.io/name: flotilla
{{- end -}}

{{/* Every object's labels: manifests/' own and Helm's. */}}
{{- define "flotilla.labels" -}}
{{ include "flotilla.selectorLabels" . }}
{{ include "flotilla.helmLabels" . }}
{{- end -}}

{{/* What Helm's own scaffold puts on every object; the render test allows only these. */}}
{{- define "flotilla.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
flotilla.merge: merges the map (index . 1) into the map (index . 0), in place, recursively.
Not sprig's mergeOverwrite, which skips false, 0 and "" in what it merges (so that
config.leaderElection.enabled=false would be lost).
*/}}
{{- define "flotilla.merge" -}}
{{- $into := index . 0 -}}
{{- range $key, $value := index . 1 -}}
{{- $old := get $into $key -}}
{{- if and (kindIs "map" $value) (kindIs "map" $old) -}}
{{- include "flotilla.merge" (list $old $value) -}}
{{- else -}}
{{- $_ := set $into $key $value -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
flotilla.yaml as the pod reads it: the repository's (or configFile), its namespace the release's,
with `config` merged over it. Left as it is, comments and all, when nothing is merged.
*/}}
{{- define "flotilla.config" -}}
{{- $base := .Values.configFile -}}
{{- if not $base -}}
{{- $base = index (.Files.Get "files/config.yaml" | fromYaml) "data" "flotilla.yaml" -}}
{{- end -}}
{{- $parsed := fromYaml $base -}}
{{- if hasKey $parsed "Error" -}}
{{- fail (printf "configFile is not a YAML map: %s" (get $parsed "Error")) -}}
{{- end -}}
{{- $namespace := get .Values.config "namespace" | default .Release.Namespace -}}
{{- if ne $namespace .Release.Namespace -}}
{{- fail (printf "config.namespace is %s but the release is in namespace %s: flotilla's Lease, revisions and RBAC are in the release's namespace, so leave config.namespace unset" $namespace .Release.Namespace) -}}
{{- end -}}
{{- $templates := get .Values.config "templates" | default (get $parsed "templates") -}}
{{- if ne (toString $templates) "../templates" -}}
{{- fail (printf "the config's templates is %q: the chart mounts the templates beside the config, at ../templates, so set it so or leave it out of config and configFile" (toString $templates)) -}}
{{- end -}}
{{- if .Values.config -}}
{{- include "flotilla.merge" (list $parsed .Values.config) -}}
{{- $_ := set $parsed "namespace" .Release.Namespace -}}
{{- toYaml $parsed -}}
{{- else if hasKey $parsed "namespace" -}}
{{- regexReplaceAll "(?m)^namespace:.*$" $base (printf "namespace: %s" .Release.Namespace) -}}
{{- else -}}
{{- printf "%s\nnamespace: %s\n" (trimSuffix "\n" $base) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The config's instance: the name of its Lease and Fleet and the label on what it stamps. */}}
{{- define "flotilla.instance" -}}
{{- get (include "flotilla.config" . | fromYaml) "instance" | default "flotilla" -}}
{{- end -}}
