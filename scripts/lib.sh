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

target_dir="${CARGO_TARGET_DIR:-target}"

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

# The live board's browser test: Debian's Chromium (installed when missing) and playwright-core
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
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
}
