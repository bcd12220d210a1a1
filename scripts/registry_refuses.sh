#!/usr/bin/env bash
# registry_refuses.sh pip|apt PACKAGE: exit 0 only when the registry, asked
# again now, really refuses PACKAGE (no network to it, or no such package);
# exit 1 when it hands the package over, so a test that skipped with "a
# registry said no" was wrong to skip. scripts/not_run.sh asks it in CI before
# it accepts a required suite's skip.
#   pip: `pip download --no-deps` of the package into a scratch folder;
#   apt: `apt-get update`, then a candidate in `apt-cache policy`.
set -uo pipefail
kind=${1:?pip or apt} package=${2:?package}
case $kind in
  pip)
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    if timeout 300 python3 -m pip download --quiet --no-deps --disable-pip-version-check \
        --dest "$scratch" "$package" >"$scratch.log" 2>&1; then
      echo "registry_refuses: PyPI hands over $package"
      rm -f "$scratch.log"
      exit 1
    fi
    echo "registry_refuses: PyPI refuses $package: $(tail -1 "$scratch.log")"
    rm -f "$scratch.log"
    exit 0 ;;
  apt)
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo -n"
    $sudo_cmd apt-get update -qq >/dev/null 2>&1
    candidate=$(apt-cache policy "$package" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [ -n "$candidate" ] && [ "$candidate" != "(none)" ]; then
      echo "registry_refuses: Debian's archive has $package $candidate"
      exit 1
    fi
    echo "registry_refuses: Debian's archive has no candidate for $package"
    exit 0 ;;
  *) echo "registry_refuses: unknown registry '$kind' (pip or apt)" >&2; exit 2 ;;
esac
