# Sourced by tests/upstream/*_env.sh: where a side environment (a trainer's or a tool's own venv,
# never the project's) is built, and when it is built again.
#
# Without a VENV argument the venv is built once per machine into a cache folder named after what
# it holds, RECIPE_SIDE_ENVS (default ${XDG_CACHE_HOME:-~/.cache}/recipe/side-envs)/NAME-KEY, KEY a
# hash of the interpreter's version, `what` and the build steps with their pins, and the checkout gets a
# link to it, .venv-NAME. A fresh clone (every CI run) finds the build its pins ask for and reuses
# it instead of downloading gigabytes again; changed pins give another KEY, so a stale venv is
# never reused, and the one it replaces is removed. With a VENV argument the venv is built there.
#
# The sourcing script sets `name` (the link is .venv-$name), `what` (for messages), `python` (the
# interpreter to build with) and `pins` (an array), defines `ready VENV` (exit 0 when VENV imports
# what it must, at the pinned version) and `build VENV` (makes it from nothing), then calls
# `side_env_main "$@"`.

side_env_main() {
    local root cache key target link start
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    if [ $# -ge 1 ]; then
        target=$1
        link=
    else
        cache="${RECIPE_SIDE_ENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/recipe/side-envs}"
        # `declare -f` prints the build steps without their comments: a reworded comment keeps the key
        key=$({ "$python" -c 'import platform, sys; print(sys.version, platform.machine())'; declare -f build
            printf '%s\n' "$what" "${pins[@]}"; } | sha256sum | cut -c1-12)
        target="$cache/$name-$key"
        link="$root/.venv-$name"
    fi
    mkdir -p "$(dirname "$target")"
    # two runs that need the same venv (two clones' CI, a developer beside it) build it once
    exec 9>"$target.lock"
    flock 9
    # .built is written once `ready` passed after a build: a warm start costs no import (LeRobot's
    # takes most of a minute on a busy host); without it the venv is checked, or built again
    if [ -f "$target/.built" ] || { [ -x "$target/bin/python" ] && ready "$target"; }; then
        touch "$target/.built"
        echo "$name venv: $target is ready ($what)"
    else
        start=$SECONDS
        rm -rf "$target"  # a build cut short fails `ready`: start again from nothing
        build "$target"
        ready "$target" || { echo "$name venv: $target was built but does not import $what" >&2; return 1; }
        touch "$target/.built"
        echo "$name venv: built $target in $((SECONDS - start)) s ($(du -sh "$target" | cut -f1))"
        if [ -n "$link" ]; then  # the builds of earlier pins: gigabytes nothing will read again
            local old
            for old in "$cache/$name"-*; do
                case "$old" in "$target" | "$target.lock") ;; *) rm -rf "$old" ;; esac
            done
        fi
    fi
    if [ -n "$link" ]; then
        [ -L "$link" ] || rm -rf "$link"  # a venv built in the checkout by an older script
        ln -sfn "$target" "$link"
        echo "$name venv: $link -> $target"
    fi
}
