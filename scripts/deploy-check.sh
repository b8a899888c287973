#!/usr/bin/env bash
# Checks the deployment files offline: the Helm chart (deploy/helm/crossdock) and the
# image (deploy/docker/Dockerfile). Installs its linters first if missing
# (scripts/setup-deploy-tools.sh). Exits non-zero if any check fails.
#
#   1. helm lint --strict, with the default values and every ci/*.yaml value set;
#   2. helm template of each set, for the lowest and the newest Kubernetes version
#      checked, piped to kubeconform -strict against offline schemas;
#   3. value sets the chart must refuse (values.schema.json and the chart's own checks);
#   4. every --flag the chart passes exists in `crossdock coordinator|worker --help`
#      (when target/release/crossdock is built; skipped otherwise);
#   5. hadolint on the Dockerfile.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

scripts/setup-deploy-tools.sh || { echo "deploy-check: installing the linters failed" >&2; exit 1; }

T=$PWD/.tools
HELM=$T/helm/bin/helm
KUBECONFORM=$T/kubeconform/bin/kubeconform
HADOLINT=$T/hadolint/bin/hadolint
CHART=deploy/helm/crossdock
K8S_VERSIONS=${K8S_SCHEMA_VERSIONS:-"1.27.0 1.37.0"}
# kubeconform's own template, rooted at the schemas setup-deploy-tools.sh laid out; no
# remote location, so a missing schema is an error rather than a download.
SCHEMA_LOCATION="$T/k8s-schemas/{{.NormalizedKubernetesVersion}}-standalone{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json"
BIN=${CROSSDOCK_BIN:-target/release/crossdock}

passed=0
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# check NAME CMD...: runs CMD, prints PASS with CMD's last line, or FAIL with its output.
check() {
  local name=$1
  shift
  if "$@" >"$out" 2>&1; then
    passed=$((passed + 1))
    printf 'PASS  %s%s\n' "$name" "$(tail -n 1 "$out" | sed 's/^/  | /')"
  else
    failed=$((failed + 1))
    printf 'FAIL  %s\n' "$name"
    sed 's/^/      /' "$out"
  fi
}

# refuse NAME EXPECTED ARGS...: helm template with ARGS must fail, saying EXPECTED.
refuse() {
  local name=$1 expected=$2
  shift 2
  if "$HELM" template t "$CHART" "$@" >"$out" 2>&1; then
    failed=$((failed + 1))
    printf 'FAIL  refuses %s: rendered without an error\n' "$name"
  elif ! grep -qF -- "$expected" "$out"; then
    failed=$((failed + 1))
    printf 'FAIL  refuses %s: the error does not say "%s"\n' "$name" "$expected"
    sed 's/^/      /' "$out"
  else
    passed=$((passed + 1))
    printf 'PASS  refuses %s\n' "$name"
  fi
}

render_validate() { # K8S_VERSION HELM_ARGS...
  local v=$1
  shift
  "$HELM" template crossdock "$CHART" --namespace shuffle --kube-version "$v" "$@" |
    "$KUBECONFORM" -strict -summary -kubernetes-version "$v" -schema-location "$SCHEMA_LOCATION"
}

# The --flags of one role's containers in a rendered chart exist in its --help.
flags_exist() { # ROLE HELM_ARGS...
  local role=$1 missing=0 flag
  shift
  local help flags
  help=$("$BIN" "$role" --help) || return 1
  flags=$("$HELM" template crossdock "$CHART" "$@" |
    awk -v role="$role" '/^ *args:$/ {a=1; r=""; next} a && /^ *- / {if (r == "") r=$2; else if (r == role) print $2; next} {a=0}' |
    sed -n 's/^\(--[a-z0-9-]*\).*/\1/p' | sort -u)
  [[ -n "$flags" ]] || { echo "no $role flags found in the rendered chart"; return 1; }
  for flag in $flags; do
    grep -qE -- "(^|[ ,])$flag([ =]|$)" <<<"$help" || { echo "crossdock $role has no $flag"; missing=1; }
  done
  ((missing == 0)) || return 1
  echo "$(wc -w <<<"$flags") flags: $(tr '\n' ' ' <<<"$flags")"
}

value_sets=("")
for f in "$CHART"/ci/*.yaml; do value_sets+=("$f"); done
label() { if [[ -z "$1" ]]; then echo "default values"; else echo "${1#"$CHART"/}"; fi; }
args_of() { if [[ -n "$1" ]]; then echo "-f $1"; fi; }

echo "deploy-check: helm $("$HELM" version --short), kubeconform $("$KUBECONFORM" -v), $("$HADOLINT" --version), Kubernetes schemas $K8S_VERSIONS"

for vs in "${value_sets[@]}"; do
  # shellcheck disable=SC2046 # args_of prints "-f FILE" or nothing
  check "helm lint --strict ($(label "$vs"))" "$HELM" lint --strict "$CHART" $(args_of "$vs")
done

for vs in "${value_sets[@]}"; do
  for v in $K8S_VERSIONS; do
    # shellcheck disable=SC2046
    check "helm template | kubeconform -strict, Kubernetes $v ($(label "$vs"))" \
      render_validate "$v" $(args_of "$vs")
  done
done

refuse "a value of the wrong type" "got string, want integer" --set worker.memoryMiB=lots
refuse "an unknown value" "additional properties 'memroyMiB' not allowed" --set worker.memroyMiB=1
refuse "a short cluster secret" "/auth/secret" --set auth.secret=short
refuse "replication 2 with one worker" "needs worker.replicas >= 2" \
  --set coordinator.replication=2 --set worker.replicas=1
refuse "object-store durability without a store" "needs objectStore.url" \
  --set coordinator.durability=object-store
refuse "TLS without certificates" "needs tls.existingSecret" --set tls.enabled=true

if [[ -x "$BIN" ]]; then
  for vs in "${value_sets[@]}"; do
    for role in coordinator worker; do
      # shellcheck disable=SC2046
      check "crossdock $role knows the chart's flags ($(label "$vs"))" flags_exist "$role" $(args_of "$vs")
    done
  done
else
  echo "SKIP  the chart's flags against crossdock --help: $BIN is not built"
fi

hadolint() { "$HADOLINT" --no-color deploy/docker/Dockerfile && echo "no findings"; }
check "hadolint deploy/docker/Dockerfile" hadolint

echo "deploy-check: $passed passed, $failed failed"
((failed == 0))
