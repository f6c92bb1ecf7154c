# Shared by scripts/test and scripts/bench: the Python tools in .venv, free ports, and the
# AWS emulator. Source it from the repository root.

# venv_install <executable> <pip requirement>...: installs into .venv unless already there.
venv_install() {
  local executable=$1
  shift
  if [ ! -x ".venv/bin/$executable" ]; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check "$@"
  fi
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_for() {
  python3 - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit(f"timed out waiting for {sys.argv[1]}")
PY
}

target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"

# start_moto: moto_server on a free port (its pid in $moto, its log in the target dir), and
# the AWS SDK pointed at it.
start_moto() {
  venv_install moto_server "moto[server]==5.*"
  mkdir -p "$target_dir"
  local port
  port=$(free_port)
  .venv/bin/python scripts/moto-serial.py "$port" > "$target_dir/moto.log" 2>&1 &
  moto=$!
  wait_for "http://127.0.0.1:$port/moto-api/"
  export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
}

# The console's browser tests: Debian's Chromium (installed when missing), playwright-core, axe-core and Lighthouse
# from the lock file (it never downloads a browser of its own).
# apt_install COMMAND PACKAGE: installs Debian's PACKAGE when COMMAND is missing.
apt_install() {
  if ! command -v "$1" > /dev/null; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$2"
  fi
}

install_browser() {
  apt_install chromium chromium
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  check_console_vendor
}

# The files the console embeds (functions/api/console/vendor) must be those its lock pins: npm
# installs the lock, and each file is compared byte for byte.
check_console_vendor() {
  local console=functions/api/console
  (cd "$console" && npm ci --no-audit --no-fund --loglevel=error)
  for file in uPlot.iife.min.js uPlot.min.css; do
    cmp "$console/node_modules/uplot/dist/$file" "$console/vendor/$file" \
      || { echo "$console/vendor/$file is not the locked uplot's dist/$file" >&2; return 1; }
  done
  cmp "$console/node_modules/uplot/LICENSE" "$console/vendor/uPlot.LICENSE" \
    || { echo "$console/vendor/uPlot.LICENSE is not the locked uplot's" >&2; return 1; }
}

# start_docker: Docker's engine (Debian's docker.io, installed when missing), started when it
# is not running; $dockerd is its pid when this script started it.
start_docker() {
  apt_install dockerd docker.io
  dockerd=""
  if ! docker info > /dev/null 2>&1; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    mkdir -p "$target_dir"
    $sudo dockerd > "$target_dir/dockerd.log" 2>&1 &
    dockerd=$!
    for _ in $(seq 100); do docker info > /dev/null 2>&1 && return; sleep 0.3; done
    echo "Docker's engine did not start: $target_dir/dockerd.log"; return 1
  fi
}

# lambda_base_image: the image `sam local` runs the functions on, public.ecr.aws/lambda/
# provided:al2023-x86_64. Pulled where a registry answers (a developer's machine); where none
# does, a stand-in is made from Debian's packages: busybox for the shell SAM's image build
# runs, glibc and libgcc for the bootstraps, and the CA certificates their HTTP clients load.
lambda_base_image() {
  local image=public.ecr.aws/lambda/provided:al2023-x86_64
  docker image inspect "$image" > /dev/null 2>&1 && return
  timeout 60 docker pull -q "$image" > /dev/null 2>&1 && return
  echo "no registry answers: making a stand-in for $image from Debian's packages"
  apt_install update-ca-certificates ca-certificates
  local work root
  work=$(mktemp -d)
  root="$work/root"
  (cd "$work" && apt-get download busybox-static libc6 libgcc-s1 > /dev/null 2>&1)
  for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$root"; done
  for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
  mkdir -p "$root/tmp" "$root/var/task" "$root/var/runtime" "$root/opt" "$root/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
  echo "root:x:0:" > "$root/etc/group"
  tar -C "$root" -c . | docker import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'WORKDIR /var/task' - "$image" > /dev/null
  rm -rf "$work"
}

# start_stack WORK_DIR [stack.py up arguments]: the stack as SAM deploys it (tests/stack),
# in the background ($stack its pid), its state in WORK_DIR/state.json once it serves.
# Needs Docker's engine and the base image (start_docker, lambda_base_image) and the
# bootstraps built for this machine (cargo build -p ops-lambda --bins).
start_stack() {
  local work=$1
  shift
  venv_install moto_server "moto[server]==5.*"
  venv_install sam aws-sam-cli
  local bootstraps
  bootstraps=$(cd "$target_dir/debug" && pwd)
  rm -rf "$work" && mkdir -p "$work"
  (cd tests/stack && exec ../../.venv/bin/python stack.py up --work "$work" --state "$work/state.json" \
    --bootstraps "$bootstraps" "$@") > "$work/up.log" 2>&1 &
  stack=$!
  for _ in $(seq 600); do
    [ -f "$work/state.json" ] && return
    kill -0 "$stack" 2> /dev/null || { tail -20 "$work/up.log"; return 1; }
    sleep 0.5
  done
  echo "the stack did not start: $work/up.log"; return 1
}

# stop_stack: stops the stack start_stack started, its containers with it.
stop_stack() {
  [ -n "${stack:-}" ] || return 0
  kill "$stack" 2> /dev/null || true
  wait "$stack" 2> /dev/null || true
  stack=""
}
