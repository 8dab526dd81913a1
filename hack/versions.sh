# shellcheck shell=bash
# Pinned versions of every tool hack/tools.sh installs. Changing one here
# rebuilds that tool into a new cache entry on the next `make tools`.
# shellcheck disable=SC2034
KUBE_VERSION=v1.36.3                   # kube-apiserver, kubectl, kubelet, ... (hack/kube pins the same)
KWOK_VERSION=v0.8.0                     # KWOK: the simulated nodes of the scale tests (test/scale)
CONTROLLER_TOOLS_VERSION=v0.21.0        # controller-gen; built against k8s.io v0.36
HELM_VERSION=v3.22.0
GOLANGCI_LINT_VERSION=v2.15.0
PROMETHEUS_VERSION=v0.316.0              # promtool (Prometheus 3.16), checks the chart's alert rules
JOBSET_VERSION=v0.12.0                   # the cluster suites' training controllers (hack/controllers.sh), each built from its released module: JobSet
TRAINER_VERSION=v2.3.0                   # Kubeflow Trainer v2 (TrainJob), github.com/kubeflow/trainer/v2: it runs on JobSet v0.12
TRAINING_OPERATOR_VERSION=v1.9.3         # the Kubeflow training operator (PyTorchJob), its final release
KUEUE_VERSION=v0.17.1                    # Kueue
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
FAKE_GCS_VERSION=v1.56.1                 # fake-gcs-server: the GCS store's tests
AZURITE_VERSION=3.35.0                   # Azurite (npm): the Azure store's tests; 3.36+ need a newer Node than 20
ICEBERG_REST_VERSION=1.10.1               # Iceberg's REST catalog server: iceberg-open-api's runnable jar (Maven Central)
ICEBERG_REST_SHA256=09e6aef58984eaa58bf1e1bc5193ad023e929c6bfd38c82db7b83ffe825af724
CPYTHON_VERSION=3.13.5                   # bin/venv-lerobot's interpreter (LeRobot needs Python >= 3.12; Debian 12 has 3.11), built from source
CPYTHON_SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640   # Debian's pool: python3.13_$CPYTHON_VERSION.orig.tar.xz
FFMPEG_VERSION=7.1.5                     # FFmpeg, built static, LGPL and decode-only for the sidecar's video (hack/ffmpeg.sh), from Debian's .orig tarball
FFMPEG_SHA256=de668509caf9e35e3cd162473441fdb29538c6d96ed080292b3cf9e6fc5d558f
DAV1D_VERSION=1.5.1                      # dav1d, FFmpeg's AV1 decoder (libdav1d), the same way
DAV1D_SHA256=401813f1f89fa8fd4295805aa5284d9aed9bc7fc1fdbe554af4292f64cbabe21
MESON_VERSION=1.12.1                     # meson (PyPI, in a venv of its own), which builds dav1d
PYTHON=${PYTHON:-python3}
