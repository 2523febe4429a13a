#!/usr/bin/env bash
# Installs what building, running and testing lb needs on Debian 12.
# Safe to run again: it only calls apt-get when something is missing.
set -euo pipefail

PKGS=(gcc make cmake pkg-config libevent-dev libssl-dev libinih-dev python3 curl)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
