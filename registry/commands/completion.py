"""`recipe completion bash|zsh`: a shell completion script, generated from the CLI's own parser.

The script knows the verbs, each verb's options and which kind of value each option and
positional argument takes (a choice, a file, a directory, a recipe name...). Names that change
with the sources (recipe names, parts after `hardware=`/`backend=`/`policy=`, source names) are
asked of `recipe completion --list KIND --prefix=WORD` at each TAB; that path imports neither
torch nor anything that composes or validates a recipe.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field

from registry.errors import Exit, RecipeError
from registry.names import AXES, is_name, is_source

NAME = "completion"
HELP = "print a shell completion script (bash or zsh)"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "printed"}
EXAMPLES = """\
examples:
  source <(recipe completion bash)     # in ~/.bashrc
  source <(recipe completion zsh)      # in ~/.zshrc, after compinit
  recipe completion bash > ~/.local/share/bash-completion/completions/recipe
"""
SHELLS = ("bash", "zsh")
# What the script asks `recipe completion --list` for; the others it completes itself.
DYNAMIC = ("recipe", "target", "name", "set", "source", *(f"parts:{axis}" for axis in AXES))


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("shell", nargs="?", choices=SHELLS)
    # The script's question at each TAB: candidates of one kind, one a line (not in --help).
    p.add_argument("--list", choices=DYNAMIC, help=argparse.SUPPRESS)
    p.add_argument("--prefix", default="", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.list:
        try:
            found = candidates(args.list, args.prefix)
        except RecipeError:
            return Exit.OK  # a broken source offers nothing; `recipe list` says what is wrong
        sys.stdout.write("".join(f"{c}\n" for c in found))
        return Exit.OK
    if args.shell is None:
        raise RecipeError("which shell? (hint: recipe completion bash, or recipe completion zsh)")
    from registry.commands import _parser

    verbs = spec(_parser())
    sys.stdout.write(bash_script(verbs) if args.shell == "bash" else zsh_script(verbs))
    return Exit.OK


# --- what the parser says ---------------------------------------------------------------------
@dataclass
class Verb:
    name: str
    help: str = ""
    options: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # option -> the kind of value it takes
    positionals: list[str] = field(default_factory=list)  # kinds in order; "..." after one that repeats
    subverbs: dict[str, Verb] = field(default_factory=dict)


# Arguments whose metavar does not say what they take.
KINDS = {
    ("diff", "a"): "recipe",
    ("diff", "b"): "recipe",
    ("history", "name"): "name",
    ("source", "add", "name"): "none",
    ("source", "add", "where"): "dir",
    ("source", "update", "names"): "source",
    ("source", "remove", "name"): "source",
    ("cp", "target"): "recipe",
    ("verify", "target"): "file",  # a run folder or its recipe.lock.yaml
}


def kind_of(path: tuple[str, ...], action: argparse.Action) -> str:
    """What completes an argument: choice:A,B | recipe (name or file) | target (name, file or
    KEY=VALUE) | name | set (KEY=VALUE) | source | parts:AXIS | file | dir | none."""
    key = path + ((action.option_strings[-1],) if action.option_strings else (action.dest,))
    if key in KINDS:
        return KINDS[key]
    if action.choices:
        return "choice:" + ",".join(map(str, action.choices))
    if any(o.lstrip("-") in AXES for o in action.option_strings):
        return "parts:" + next(o.lstrip("-") for o in action.option_strings if o.lstrip("-") in AXES)
    meta = str(action.metavar or action.dest).upper()
    if "KEY=VALUE" in meta:
        return "target" if "NAME" in meta else "set"
    if "NAME" in meta and "FILE" in meta:
        return "recipe"
    if meta == "NAME" and not action.option_strings:
        return "name"
    if meta == "SOURCE":
        return "source"
    if "DIR" in meta:
        return "dir"
    if "FILE" in meta or "SCRIPT" in meta or meta.endswith((".YAML", ".JSON")):
        return "file"
    return "none"


def spec(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, Verb]:
    """The verbs of a parser (and of a verb with verbs of its own, such as `source`)."""
    verbs: dict[str, Verb] = {}
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            verb = Verb(name, helps.get(name, ""))
            for a in sub._actions:
                if a.help == argparse.SUPPRESS:
                    continue
                if isinstance(a, argparse._SubParsersAction):
                    verb.subverbs = spec(sub, path + (name,))
                elif a.option_strings:
                    verb.options += a.option_strings
                    if a.nargs != 0:
                        verb.values.update(dict.fromkeys(a.option_strings, kind_of(path + (name,), a)))
                else:
                    repeat = "..." if a.nargs in ("*", "+", argparse.REMAINDER) else ""
                    verb.positionals.append(kind_of(path + (name,), a) + repeat)
            verbs[name] = verb
    return verbs


# --- the names themselves (at each TAB: keep this path light) ---------------------------------
def candidates(kind: str, prefix: str = "") -> list[str]:
    """The completions of one kind that start with the prefix, sorted."""
    from registry.sharing import sources

    found: list[str] = []
    if kind in ("recipe", "target", "name"):
        found = _names(prefix)
    if kind in ("target", "set"):
        found += _settings(prefix)
    if kind == "source":
        found = [s.name for s in sources.all_sources() if s.name != "bundled"]
    if kind.startswith("parts:"):
        found = sources.part_names(kind.removeprefix("parts:"))
    return sorted({c for c in found if c.startswith(prefix) and _offerable(c)})


def _offerable(candidate: str) -> bool:
    """Only what reads as a name is offered: the names come from file names in shared sources,
    and a file called `$(touch x).yaml` must not reach a command line (the scripts quote what they
    insert as well)."""
    if candidate.endswith(":"):
        return is_source(candidate[:-1])
    axis, eq, part = candidate.partition("=")
    if eq:
        return axis in AXES and (not part or is_name(part))
    return is_name(candidate)


def _names(prefix: str) -> list[str]:
    """Cells of the matrix, free-standing recipes, `source:` qualified names once a colon is
    typed, and published versions once an `@` is typed."""
    import itertools

    from registry.sharing import sources

    every = sources.all_sources()
    parts = [sources.part_names(axis) for axis in AXES]
    names = {"/".join(cell) for cell in itertools.product(*parts)}
    for source in every:
        names.update(source.free_standing())
    qualifier, colon, rest = prefix.rpartition(":") if ":" in prefix else ("", "", prefix)
    if "@" in rest:
        return _versions(rest.split("@", 1)[0], qualifier, every)
    if colon:
        chosen = [s for s in every if s.name == qualifier]
        own = set(chosen[0].free_standing()) if chosen else set()
        return [f"{qualifier}:{n}" for n in sorted(names | own)] if chosen else []
    return sorted(names) + [f"{s.name}:" for s in every if s.name != "bundled"]


def _versions(name: str, qualifier: str, every) -> list[str]:
    from registry.sharing import versions

    found = []
    for source in every:
        if qualifier and source.name != qualifier:
            continue
        for v in versions.versions(source, name):
            found.append(f"{qualifier}:{name}@{v.number}" if qualifier else f"{name}@{v.number}")
    return found


def _settings(prefix: str) -> list[str]:
    """Axis swaps: `hardware=` and, after it, the hardware parts."""
    from registry.sharing import sources

    axis, eq, _ = prefix.partition("=")
    if eq and axis in AXES:
        return [f"{axis}={p}" for p in sources.part_names(axis)]
    return [f"{axis}=" for axis in AXES]


# --- the scripts ------------------------------------------------------------------------------
def _flat(verbs: dict[str, Verb]) -> dict[str, Verb]:
    """Every verb, a verb's own verbs as `source add`."""
    out = {}
    for name, verb in verbs.items():
        out[name] = verb
        for sub, v in verb.subverbs.items():
            out[f"{name} {sub}"] = v
    return out


def _case(entries: list[tuple[str, str]], indent: str, default: str = "REPLY=''") -> str:
    """The arms of a `case` statement (the same syntax in bash and zsh) setting REPLY."""
    lines = [f"{indent}{shlex.quote(pattern)}) REPLY={shlex.quote(value)} ;;" for pattern, value in entries]
    return "\n".join(lines + [f"{indent}*) {default} ;;"])


def _tables(verbs: dict[str, Verb], top: list[str]) -> str:
    flat = _flat(verbs)
    options = [(name, " ".join(v.options)) for name, v in flat.items()]
    values = [(f"{name} {o}", k) for name, v in flat.items() for o, k in v.values.items()]
    positionals = [(name, " ".join(v.positionals)) for name, v in flat.items() if v.positionals]
    subverbs = [(name, " ".join(v.subverbs)) for name, v in verbs.items() if v.subverbs]
    return f"""\
_recipe_verbs={shlex.quote(" ".join(verbs))}
_recipe_top_options={shlex.quote(" ".join(top))}

# The options of a verb.
_recipe_options() {{
    case $1 in
{_case(options, " " * 8)}
    esac
}}

# The kind of value an option of a verb takes (empty: the option is a flag).
_recipe_value() {{
    case "$1 $2" in
{_case(values, " " * 8)}
    esac
}}

# The kinds of a verb's positional arguments, in order ("..." after one that repeats).
_recipe_positional() {{
    case $1 in
{_case(positionals, " " * 8)}
    esac
}}

# The verbs of a verb (recipe source add|list|update|remove).
_recipe_subverbs() {{
    case $1 in
{_case(subverbs, " " * 8)}
    esac
}}
"""


# The walk over the words before the cursor: the verb, the option whose value is being typed, and
# how many positional arguments came before. The same in bash and zsh (the words in `_recipe_ws`).
_WALK = """\
    local verb='' expect='' npos=0 w REPLY
    for w in "${_recipe_ws[@]}"; do
        if [[ -n $expect && $w != -* ]]; then
            expect=''
            continue
        fi
        expect=''
        case $w in
            -*=*|--) ;;
            -*)
                if [[ -n $verb ]]; then
                    _recipe_value "$verb" "$w"
                    [[ -n $REPLY ]] && expect=$w
                fi
                ;;
            *)
                if [[ -z $verb ]]; then
                    verb=$w
                else
                    _recipe_subverbs "$verb"
                    if [[ -n $REPLY && $verb != *' '* ]]; then
                        verb="$verb $w"
                    else
                        npos=$((npos + 1))
                    fi
                fi
                ;;
        esac
    done
    # What completes the current word: a kind, or a list of words.
    local kind='' pre='' wordlist=''
    if [[ -n $expect ]]; then
        _recipe_value "$verb" "$expect"
        kind=$REPLY
    elif [[ $cur == -*=* && -n $verb ]]; then
        _recipe_value "$verb" "${cur%%=*}"
        kind=$REPLY
        pre="${cur%%=*}="
        cur=${cur#*=}
    elif [[ $cur == -* ]]; then
        if [[ -z $verb ]]; then
            wordlist=$_recipe_top_options
        else
            _recipe_options "$verb"
            wordlist=$REPLY
        fi
        kind=words
    elif [[ -z $verb ]]; then
        kind=verbs
    else
        _recipe_subverbs "$verb"
        if [[ -n $REPLY && $verb != *' '* ]]; then
            wordlist=$REPLY
            kind=words
        else
            _recipe_positional "$verb"
            local k i=0
            for k in ${=REPLY}; do
                if ((i == npos)) || [[ $k == *... && $i -le $npos ]]; then
                    kind=${k%...}
                fi
                i=$((i + 1))
            done
        fi
    fi
    if [[ $kind == choice:* ]]; then
        wordlist=${kind#choice:}
        wordlist=${wordlist//,/ }
        kind=words
    fi
"""


def bash_script(verbs: dict[str, Verb]) -> str:
    # `${=REPLY}` is zsh's word splitting; bash splits an unquoted expansion anyway (the kinds
    # hold no glob characters).
    walk = _WALK.replace("${=REPLY}", "$REPLY")
    return f"""\
# bash completion for recipe (generated by `recipe completion bash`; regenerate after an upgrade).
# Use: source <(recipe completion bash)
{_tables(verbs, ["-h", "--help", "--version"])}
# Candidates of a kind that `recipe completion --list` knows (names from the sources), kept
# apart in _recipe_names: they are quoted once cut at the word break (the end of _recipe).
_recipe_list() {{
    local line
    while IFS= read -r line; do
        _recipe_names+=("$line")
    done < <("$_recipe_prog" completion --list "$1" --prefix="$2" 2>/dev/null)
}}

# Files (f) or directories (d) that start with the word; directories end with a slash.
_recipe_files() {{
    local f
    while IFS= read -r f; do
        [[ -d $f ]] && f+=/
        printf -v f '%q' "$f"
        COMPREPLY+=("${{f/#\\\\~/\\~}}")
    done < <(compgen -"$1" -- "$2")
}}

# Those of the words (space-separated) that start with the prefix.
_recipe_words() {{
    local -a all
    local w
    read -ra all <<< "$1"
    for w in "${{all[@]}}"; do
        [[ $w == "$2"* ]] && COMPREPLY+=("$w")
    done
}}

_recipe() {{
    COMPREPLY=()
    local -a _recipe_names=()
    local line=${{COMP_LINE:0:COMP_POINT}} cur=''
    local -a _recipe_ws
    read -ra _recipe_ws <<< "$line"
    if [[ -n $line && $line != *[[:space:]] && ${{#_recipe_ws[@]}} -gt 0 ]]; then
        cur=${{_recipe_ws[${{#_recipe_ws[@]}}-1]}}
        unset '_recipe_ws[${{#_recipe_ws[@]}}-1]'
    fi
    local _recipe_prog=${{_recipe_ws[0]:-recipe}}
    _recipe_prog=${{_recipe_prog/#\\~/$HOME}}
    _recipe_ws=("${{_recipe_ws[@]:1}}")
{walk}
    case $kind in
        verbs) _recipe_words "$_recipe_verbs" "$cur" ;;
        words) _recipe_words "$wordlist" "$cur" ;;
        file) _recipe_files f "$cur" ;;
        dir) _recipe_files d "$cur" ;;
        recipe|target)
            _recipe_list "$kind" "$cur"
            _recipe_files f "$cur"
            ;;
        name|set|source|parts:*) _recipe_list "$kind" "$cur" ;;
    esac
    # bash replaces only the part of the word after its last word-break character (the = of
    # hardware=, the : of team-a:): offer that part.
    local full=$pre$cur n=0 j c w
    for ((j = 0; j < ${{#full}}; j++)); do
        c=${{full:j:1}}
        [[ $c != [[:space:]] && $COMP_WORDBREAKS == *"$c"* ]] && n=$((j + 1))
    done
    for j in "${{!COMPREPLY[@]}}"; do
        COMPREPLY[j]=$pre${{COMPREPLY[j]}}
        COMPREPLY[j]=${{COMPREPLY[j]:n}}
    done
    # bash inserts COMPREPLY as typed: a name is quoted (%q), so that whatever a source's file is
    # called, Enter passes it as one argument and runs nothing (files were quoted as listed)
    local -a quoted=()
    for w in "${{_recipe_names[@]}}"; do
        w=$pre$w
        w=${{w:n}}
        [[ -n $w ]] && printf -v w '%q' "$w"
        quoted+=("$w")
    done
    COMPREPLY=("${{quoted[@]}}" "${{COMPREPLY[@]}}")
    if ((${{#COMPREPLY[@]}} == 1)) && [[ ${{COMPREPLY[0]}} == *[=/:] ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}}

complete -F _recipe recipe
"""


def zsh_script(verbs: dict[str, Verb]) -> str:
    described = [f"{name}:{verb.help}" for name, verb in verbs.items()]
    return f"""\
#compdef recipe
# zsh completion for recipe (generated by `recipe completion zsh`; regenerate after an upgrade).
# Use: source <(recipe completion zsh) after compinit, or save it as _recipe in a folder of $fpath.
{_tables(verbs, ["-h", "--help", "--version"])}
_recipe_described=({" ".join(shlex.quote(d) for d in described)})

# Candidates of a kind that `recipe completion --list` knows (names from the sources); a word
# that ends in = or : takes no space after it. compadd quotes what it inserts (no -Q): a name is
# passed as one argument whatever a source's file is called.
_recipe_list() {{
    local -a found open
    found=("${{(@f)$("$_recipe_prog" completion --list "$1" --prefix="$2" 2>/dev/null)}}")
    found=(${{found:#}})
    open=(${{(M)found:#*[=:]}})
    found=(${{found:#*[=:]}})
    (( ${{#open}} )) && compadd -S '' -- "${{open[@]}}"
    (( ${{#found}} )) && compadd -- "${{found[@]}}"
}}

_recipe() {{
    local cur=${{words[CURRENT]}}
    local _recipe_prog=${{words[1]:-recipe}}
    local -a _recipe_ws
    _recipe_ws=("${{(@)words[2,CURRENT-1]}}")
{_WALK}
    if [[ -n $pre ]]; then
        compset -P '*='
    fi
    case $kind in
        verbs) _describe -t verbs 'recipe verb' _recipe_described ;;
        words) compadd -- ${{=wordlist}} ;;
        file) _files ;;
        dir) _files -/ ;;
        recipe|target)
            _recipe_list "$kind" "$cur"
            _files
            ;;
        name|set|source|parts:*) _recipe_list "$kind" "$cur" ;;
    esac
}}

if [[ "$funcstack[1]" == "_recipe" ]]; then
    _recipe "$@"
else
    compdef _recipe recipe
fi
"""
