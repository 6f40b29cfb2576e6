# bash completion for probing: commands and their aliases, each command's
# options (from its own --help), targets (the agents `probing list`
# finds), output formats, and setting names after `config` and -D (from
# the target's agent, else the only agent on the machine).
# `make install` puts it in PREFIX/share/bash-completion/completions/.

_probing_commands()
{
	"$1" --help 2>/dev/null | awk '
		/^Commands:/ { on = 1; next }
		on && /^$/ { exit }
		on {
			print $1
			if (match($0, /\(also: [^)]*\)/)) {
				n = split(substr($0, RSTART + 7, RLENGTH - 8), a, " ")
				for (i = 1; i <= n; i++) print a[i]
			}
		}'
}

_probing_agents()
{
	"$1" list -f csv 2>/dev/null | awk -F, 'NR > 1 { print $1 }'
}

# The setting names of target $2 (or of the only agent), as NAME=.
_probing_settings()
{
	local prog=$1 target=$2
	if [ -z "$target" ]; then
		target=$(_probing_agents "$prog")
		[ "$(printf '%s\n' "$target" | grep -c .)" = 1 ] || return
	fi
	"$prog" -t "$target" --timeout 2000 config -f csv 2>/dev/null |
		awk -F, 'NR > 1 { print $1 "=" }'
}

_probing()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev= prog=${COMP_WORDS[0]}
	local cmd= target= w i
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
	# The command so far: global options, a target first, the command.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-t | --target | -p | --pid)
			target=${COMP_WORDS[i + 1]}
			((i++))
			continue
			;;
		--timeout | --token | -f | --format)
			[ -z "$cmd" ] && ((i++))
			continue
			;;
		-*) continue ;;
		esac
		if [ -z "$cmd" ] && [ -z "$target" ] &&
			[[ $w =~ ^[0-9]+$ || $w == @* || $w == */* || $w =~ :[0-9]+$ ]]; then
			target=$w
		elif [ -z "$cmd" ]; then
			cmd=$w
		fi
	done
	case $prev in
	-t | --target | -p | --pid)
		COMPREPLY=($(compgen -W "$(_probing_agents "$prog")" -- "$cur"))
		return
		;;
	-f | --format)
		COMPREPLY=($(compgen -W "table json csv" -- "$cur"))
		return
		;;
	--as)
		COMPREPLY=($(compgen -W "svg folded speedscope chrome" -- "$cur"))
		return
		;;
	-o | --output | -e | --execute | -L | --library | --nodes)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	-D | --define)
		compopt -o nospace 2>/dev/null
		COMPREPLY=($(compgen -W "$(_probing_settings "$prog" "$target")" -- "$cur"))
		return
		;;
	esac
	if [ -z "$cmd" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-t --target -p --pid --timeout --token
				-f --format --no-pager -h --help -V --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$(_probing_commands "$prog") help" -- "$cur"))
		fi
		return
	fi
	if [[ $cur == -* ]]; then
		# The option lines of its help: "  -d, --duration D  ...".
		COMPREPLY=($(compgen -W "$("$prog" help "$cmd" 2>/dev/null |
			grep -E -- '^ {2,6}-' |
			grep -oE -- '(^ +|, )--?[a-zA-Z][a-zA-Z-]*' |
			grep -oE -- '--?[a-zA-Z][a-zA-Z-]*' | sort -u)" -- "$cur"))
		return
	fi
	case $cmd in
	help)
		COMPREPLY=($(compgen -W "$(_probing_commands "$prog")" -- "$cur"))
		;;
	config)
		compopt -o nospace 2>/dev/null
		COMPREPLY=($(compgen -W "$(_probing_settings "$prog" "$target")" -- "$cur"))
		;;
	cluster)
		COMPREPLY=($(compgen -W "nodes attach add query backtrace hang flamegraph" -- "$cur"))
		;;
	report)
		COMPREPLY=($(compgen -f -- "$cur"))
		;;
	esac
}

complete -F _probing probing
