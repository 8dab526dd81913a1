{{/* The name prefix of every object of the release. */}}
{{- define "shardfeed.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "shardfeed.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "shardfeed.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "shardfeed.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
A CEL expression, over an admission request's object, true when the pod
template at a path is labelled shardfeed.io/dataset: "name[]" is each item
of a list, "*" each value of a map (internal/jobkind's LabelledCEL, which
the tests hold it to). Takes (dict "expr" "object" "segs" (splitList "." path) "depth" 0).
*/}}
{{- define "shardfeed.labelledCEL" -}}
{{- $expr := .expr }}
{{- $conds := list }}
{{- $done := false }}
{{- range $i, $s := .segs }}
{{- if not $done }}
{{- if eq $s "*" }}
{{- $v := printf "k%d" (int $.depth) }}
{{- $rest := include "shardfeed.labelledCEL" (dict "expr" (printf "%s[%s]" $expr $v) "segs" (slice $.segs (add1 $i)) "depth" (add1 $.depth)) }}
{{- $conds = append $conds (printf "%s.exists(%s, %s)" $expr $v $rest) }}
{{- $done = true }}
{{- else if hasSuffix "[]" $s }}
{{- $v := printf "x%d" (int $.depth) }}
{{- $expr = printf "%s.%s" $expr (trimSuffix "[]" $s) }}
{{- $rest := include "shardfeed.labelledCEL" (dict "expr" $v "segs" (slice $.segs (add1 $i)) "depth" (add1 $.depth)) }}
{{- $conds = append $conds (printf "has(%s)" $expr) }}
{{- $conds = append $conds (printf "%s.exists(%s, %s)" $expr $v $rest) }}
{{- $done = true }}
{{- else }}
{{- $expr = printf "%s.%s" $expr $s }}
{{- $conds = append $conds (printf "has(%s)" $expr) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $done }}
{{- $conds = append $conds (printf "has(%s.metadata)" $expr) }}
{{- $conds = append $conds (printf "has(%s.metadata.labels)" $expr) }}
{{- $conds = append $conds (printf "'shardfeed.io/dataset' in %s.metadata.labels" $expr) }}
{{- end }}
{{- join " && " $conds }}
{{- end }}

{{/*
The match condition of a queued kind: any of its pod templates labelled.
*/}}
{{- define "shardfeed.kindLabelledCEL" -}}
{{- $exprs := list }}
{{- range .podTemplates }}
{{- $exprs = append $exprs (include "shardfeed.labelledCEL" (dict "expr" "object" "segs" (splitList "." .) "depth" 0)) }}
{{- end }}
{{- if eq (len $exprs) 1 }}{{ first $exprs }}{{ else }}({{ join ") || (" $exprs }}){{ end }}
{{- end }}
