#!/bin/sh
# Install Debian's headless Chromium and its driver for the browser tests; idempotent.
set -eu

present() {
    [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || return 1
    # dpkg unpacks the binaries before it configures the packages: while another apt-get is
    # half way through installing them, go on to apt-get, which waits for its lock and finishes.
    command -v dpkg-query >/dev/null 2>&1 || return 0
    for pkg in chromium chromium-driver; do
        # A package dpkg does not know was installed some other way: the binaries are enough.
        status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) || continue
        [ "$status" = installed ] || return 1
    done
}

if present; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium.sh: apt-get not found; install Chromium and chromedriver so that" \
         "/usr/bin/chromium and /usr/bin/chromedriver exist (Debian packages: chromium," \
         "chromium-driver)" >&2
    exit 1
fi

if [ "$(id -u)" = 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
else
    echo "install-chromium.sh: not root and sudo not found; run as root:" \
         "apt-get install chromium chromium-driver" >&2
    exit 1
fi

# Another apt-get may hold the dpkg lock (e.g. a provisioning step): wait for it, don't fail.
lock="-o DPkg::Lock::Timeout=300"
# $as_root and $lock are split into words on purpose.
# shellcheck disable=SC2086
$as_root env DEBIAN_FRONTEND=noninteractive apt-get $lock update -qq
# shellcheck disable=SC2086
$as_root env DEBIAN_FRONTEND=noninteractive apt-get $lock install -y -qq --no-install-recommends \
    chromium chromium-driver

for bin in /usr/bin/chromium /usr/bin/chromedriver; do
    if [ ! -x "$bin" ]; then
        echo "install-chromium.sh: apt-get finished but $bin is missing" >&2
        exit 1
    fi
done
